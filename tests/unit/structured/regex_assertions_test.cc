// Anchors inside a pattern and lookaheads at its ends (issue 6): understood by the code-point
// automaton, so the grammar lowering, the JSON Schema `pattern` path and the validator agree.
// Each case includes strings a pattern without the assertion would accept.
#include <gtest/gtest.h>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::synthetic_vocabulary;
using testing::walk_text;

CodePointDfa pattern(const std::string& p, bool search = true) {
  auto d = dfa_from_pattern(p, search);
  EXPECT_TRUE(d.is_ok()) << p << ": " << d.status().message();
  return d.is_ok() ? *d : CodePointDfa{};
}

TEST(RegexAssertions, InnerAnchorsInSearchPatterns) {
  CodePointDfa a = pattern("^([^,]|$)");  // empty, or begins with a non-comma
  EXPECT_TRUE(dfa_matches(a, ""));
  EXPECT_TRUE(dfa_matches(a, "x,,"));
  EXPECT_FALSE(dfa_matches(a, ","));
  EXPECT_FALSE(dfa_matches(a, ",x"));
  CodePointDfa g = pattern("(^[a-z]+$)");  // a group holding both anchors
  EXPECT_TRUE(dfa_matches(g, "abc"));
  EXPECT_FALSE(dfa_matches(g, "ab1"));
  EXPECT_FALSE(dfa_matches(g, "1abc"));
  CodePointDfa alt = pattern("(^[^5]*$)|7");  // no 5 at all, or a 7 anywhere
  EXPECT_TRUE(dfa_matches(alt, "1234"));
  EXPECT_TRUE(dfa_matches(alt, "57"));
  EXPECT_FALSE(dfa_matches(alt, "15"));
  CodePointDfa rep = pattern("^([^,]+(,|$)){3,}$");  // at least three comma-separated fields
  EXPECT_TRUE(dfa_matches(rep, "a,b,c"));
  EXPECT_TRUE(dfa_matches(rep, "a,b,c,d"));
  EXPECT_FALSE(dfa_matches(rep, "a,b"));
  EXPECT_FALSE(dfa_matches(rep, "a,b,"));
  CodePointDfa mid = pattern("a$b");  // `$` before a character: nothing matches
  EXPECT_TRUE(dfa_is_empty(mid));
  CodePointDfa start = pattern("x^");  // `^` after a character: nothing either
  EXPECT_TRUE(dfa_is_empty(start));
  EXPECT_TRUE(dfa_matches(pattern("^^a$$"), "a"));
}

TEST(RegexAssertions, LookaheadsAtTheEnds) {
  CodePointDfa neg = pattern("^(?!org\\.bukkit\\.)[a-z.]+$");
  EXPECT_TRUE(dfa_matches(neg, "org.example.x"));
  EXPECT_TRUE(dfa_matches(neg, "org.bukkit"));
  EXPECT_FALSE(dfa_matches(neg, "org.bukkit.x"));
  CodePointDfa pos = pattern("^(?=.{2,4}$)(?!.*-)[a-z-]+$");  // length 2..4, no '-'
  EXPECT_TRUE(dfa_matches(pos, "abcd"));
  EXPECT_FALSE(dfa_matches(pos, "a"));
  EXPECT_FALSE(dfa_matches(pos, "abcde"));
  EXPECT_FALSE(dfa_matches(pos, "ab-c"));
  CodePointDfa trail = pattern("/[a-z]+(?=\\.(yaml|json))");  // R(?=Y) in a search == RY
  EXPECT_TRUE(dfa_matches(trail, "x/abc.yaml"));
  EXPECT_TRUE(dfa_matches(trail, "/a.json!"));
  EXPECT_FALSE(dfa_matches(trail, "/abc.txt"));
  EXPECT_FALSE(dfa_matches(trail, "abc.yaml"));
}

TEST(RegexAssertions, RefusedWhereNotExact) {
  // Lookarounds anywhere else, lookbehind, quantified anchors or lookaheads, and `(?!` at
  // the end (not a plain concatenation) stay refused or invalid, never approximated.
  for (const char* p : {"a(?=b)c", "^a(?!b)", "(?<=a)b", "^(?<!a)b", "^(?=a)*b", "a(?!b)"}) {
    auto d = dfa_from_pattern(p, true);
    ASSERT_FALSE(d.is_ok()) << p;
    EXPECT_EQ(d.status().code(), StatusCode::kUnsupported) << p << ": " << d.status().message();
  }
  for (const char* p : {"a^*", "a$+", "^a$?"}) {
    auto d = dfa_from_pattern(p, true);
    ASSERT_FALSE(d.is_ok()) << p;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << p;
  }
}

TEST(RegexAssertions, JsonSchemaPatternAndRegexGrammar) {
  auto vocab = synthetic_vocabulary();
  auto schema = compile_grammar(
      {GrammarSpec::kJsonSchema, R"J({"type":"string","pattern":"(^[a-z]+$)|(^\\[.*\\]$)"})J", {}},
      vocab);
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  bool mismatch = false;
  EXPECT_TRUE(walk_text(*schema, "\"abc\"", &mismatch));
  EXPECT_TRUE(walk_text(*schema, "\"[1, 2]\"", &mismatch));
  EXPECT_FALSE(walk_text(*schema, "\"ab[c]\"", &mismatch));
  EXPECT_FALSE(walk_text(*schema, "\"abc1\"", &mismatch));
  EXPECT_FALSE(mismatch);
  // With length bounds the pattern goes through the product automaton.
  auto bounded = compile_grammar(
      {GrammarSpec::kJsonSchema, R"J({"type":"string","pattern":"^([^,]|$)","maxLength":2})J", {}},
      vocab);
  ASSERT_TRUE(bounded.is_ok()) << bounded.status().message();
  EXPECT_TRUE(walk_text(*bounded, "\"\"", &mismatch));
  EXPECT_TRUE(walk_text(*bounded, "\"a,\"", &mismatch));
  EXPECT_FALSE(walk_text(*bounded, "\",a\"", &mismatch));
  EXPECT_FALSE(walk_text(*bounded, "\"abc\"", &mismatch));
  EXPECT_FALSE(mismatch);
  // A whole-output regex (no search padding): inner anchors still hold.
  auto re = compile_grammar({GrammarSpec::kRegex, "(a|^b)c$", {}}, vocab);
  ASSERT_TRUE(re.is_ok()) << re.status().message();
  EXPECT_TRUE(walk_text(*re, "ac", &mismatch));
  EXPECT_TRUE(walk_text(*re, "bc", &mismatch));
  EXPECT_FALSE(walk_text(*re, "bcc", &mismatch));
  EXPECT_FALSE(mismatch);
}

}  // namespace
}  // namespace deepinfer::structured
