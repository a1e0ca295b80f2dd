// Issue 31: hostile schemas, regexes and grammars. Deep nesting is refused with an error (never
// a stack overflow), object keys are well-formed UTF-8 as string values are, a grammar that
// matches nothing is a compile error, an alternative that cannot be completed is never offered,
// and refusals that had general answers (formats, anyOf with oneOf, decimal multipleOf) compile.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "deepinfer/structured/ebnf_parser.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/tools/bench_mask.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {
using namespace deepinfer::tools;  // the mask bench runner walks the instances

using testing::synthetic_vocabulary;

std::string nested(const std::string& open, const std::string& inner, const std::string& close, int n) {
  std::string s;
  s.reserve((open.size() + close.size()) * n + inner.size());
  for (int i = 0; i < n; ++i) s += open;
  s += inner;
  for (int i = 0; i < n; ++i) s += close;
  return s;
}

CompileResult compile_spec(GrammarSpec::Kind kind, const std::string& source) {
  return compile_grammar({kind, source, {}}, synthetic_vocabulary());
}

void expect_error(GrammarSpec::Kind kind, const std::string& source, const std::string& words) {
  CompileResult r = compile_spec(kind, source);
  ASSERT_FALSE(r.is_ok()) << source.substr(0, 200);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
}

// --- 1. Depth ------------------------------------------------------------------------------

TEST(HostileDepth, DeepConstAndEnumAreRefusedByName) {
  expect_error(GrammarSpec::kJsonSchema, "{\"const\":" + nested("[", "", "]", 50000) + "}",
               "nested more than 256 levels deep under '/const'");
  expect_error(GrammarSpec::kJsonSchema, "{\"enum\":[" + nested("[", "1", "]", 100000) + "]}",
               "under '/enum'");
}

TEST(HostileDepth, DeepAnnotationIsRefusedByName) {
  expect_error(GrammarSpec::kJsonSchema,
               "{\"type\":\"string\",\"description\":" + nested("{\"a\":", "1", "}", 100000) + "}",
               "under '/description'");
  expect_error(GrammarSpec::kJsonSchema, nested("{\"not\":", "{}", "}", 100000), "nested more than");
}

TEST(HostileDepth, DepthWithinTheLimitStillCompiles) {
  auto r = compile_spec(GrammarSpec::kJsonSchema, "{\"const\":" + nested("[", "", "]", 250) + "}");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(testing::accepts(*r, nested("[", "", "]", 250)));
}

TEST(HostileDepth, DeepRegexAndGrammarGroupsAreRefused) {
  expect_error(GrammarSpec::kRegex, nested("(", "a", ")", 100000), "nested more than 256 deep");
  expect_error(GrammarSpec::kRegex, "a" + std::string(40000, '?'), "quantifiers in a row");
  std::string stacked = "a";
  for (int i = 0; i < 20000; ++i) stacked += "{1}";
  expect_error(GrammarSpec::kRegex, stacked, "quantifiers in a row");
  expect_error(GrammarSpec::kEbnf, "root ::= " + nested("(", "\"a\"", ")", 100000), "nested more than 256");
  expect_error(GrammarSpec::kJsonSchema,
               "{\"type\":\"string\",\"pattern\":\"" + nested("(", "a", ")", 100000) + "\"}",
               "nested more than 256 deep");
  // 200 levels of groups are fine.
  EXPECT_TRUE(compile_spec(GrammarSpec::kRegex, nested("(", "a", ")", 200)).is_ok());
}

TEST(HostileDepth, LongRuleChainsDoNotRecurse) {
  // 100,000 rules, each calling the next before a byte: the left-recursion and
  // productivity checks walk them without recursion.
  std::string g = "root ::= r0 \"x\"\n";
  const int n = 100000;
  for (int i = 0; i < n; ++i) g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  g += "r" + std::to_string(n) + " ::= \"y\"\n";
  GrammarLimits limits;
  limits.max_compile_seconds = 60;
  auto r = compile_ebnf(g, limits);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  // A cycle among them, closed at the end, is found as left recursion.
  std::string cyc = g.substr(0, g.rfind("r" + std::to_string(n) + " ::=")) + "r" + std::to_string(n) + " ::= r0 \"y\"\n";
  auto c = compile_ebnf(cyc, limits);
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("left-recursive"), std::string::npos) << c.status().message();
}

TEST(HostileDepth, RefCyclesThroughTheValidatorEnd) {
  // enum values are checked against the schema by a validator that follows $ref.
  auto r = compile_spec(GrammarSpec::kJsonSchema,
                        R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},
                            "$ref":"#/$defs/a","enum":[1, [1], {"a":1}]})");
  // Whatever the verdict (nothing satisfies a pure cycle), an answer and no crash.
  if (r.is_ok()) {
    EXPECT_FALSE(testing::accepts(*r, "2"));
  }
  auto s = compile_spec(GrammarSpec::kJsonSchema, R"({"$ref":"#","minimum":1,"enum":[1,2]})");
  if (s.is_ok()) {
    EXPECT_FALSE(testing::accepts(*s, "3"));
  }
}

// --- 2. Keys are UTF-8 ---------------------------------------------------------------------

const char* const kIllFormed[] = {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "\x80"};

TEST(KeyUtf8, OpenObjectsRejectIllFormedKeys) {
  for (const char* schema : {R"({"type":"object"})", R"({"type":"object","properties":{"a":{"type":"integer"}}})",
                             R"({"type":"object","properties":{"é":{}},"additionalProperties":{"type":"integer"}})",
                             R"({"type":"object","properties":{"a\"b":{},"c\\d":{}}})"}) {
    auto g = testing::compile(schema);
    ASSERT_TRUE(g);
    for (const char* bad : kIllFormed) {
      EXPECT_FALSE(testing::accepts(g, std::string("{\"") + bad + "\":1}")) << schema;
      EXPECT_FALSE(testing::accepts(g, std::string("{\"a") + bad + "\":1}")) << schema;
      // After a lead byte that needs one continuation (unless `bad` starts with one).
      if ((static_cast<uint8_t>(bad[0]) & 0xC0) != 0x80) {
        EXPECT_FALSE(testing::accepts(g, std::string("{\"\xc3") + bad + "\":1}")) << schema;
      }
    }
    EXPECT_TRUE(testing::accepts(g, "{\"z\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\":1}")) << schema;
    EXPECT_TRUE(testing::accepts(g, "{\"q\\\"\\n\\u0001\":1}")) << schema;
  }
}

TEST(KeyUtf8, DeclaredNamesCannotComeBackAsExtras) {
  auto g = testing::compile(
      R"({"type":"object","properties":{"é":{"type":"string"},"a\"b":{"type":"string"}},
          "additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(g);
  EXPECT_TRUE(testing::accepts(g, "{\"\xc3\xa9\":\"x\"}"));
  EXPECT_FALSE(testing::accepts(g, "{\"\xc3\xa9\":1}"));  // declared: a string, not an extra
  EXPECT_TRUE(testing::accepts(g, "{\"\xc3\xa9x\":1}"));
  EXPECT_TRUE(testing::accepts(g, "{\"a\\\"b\":\"x\"}"));
  EXPECT_FALSE(testing::accepts(g, "{\"a\\\"b\":1}"));
  EXPECT_TRUE(testing::accepts(g, "{\"a\\\"bc\":1}"));
  // A control character in a declared name is written as \u00XX.
  auto c = testing::compile(R"({"type":"object","properties":{"a\u0001":{"type":"string"}},
                                "additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(c);
  EXPECT_FALSE(testing::accepts(c, "{\"a\\u0001\":1}"));
  EXPECT_TRUE(testing::accepts(c, "{\"a\\u0002\":1}"));
}

TEST(KeyUtf8, TheBenchmarkWalksIllFormedKeysAndValues) {
  auto v = ill_formed_variants(R"({"k":"v","n":[1]})");
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v[0].text, "{\"\xffk\":\"v\",\"n\":[1]}");
  EXPECT_EQ(v[4].text, "{\"k\":\"\xffv\",\"n\":[1]}");
  // One schema, one valid instance: its 8 ill-formed variants are walked and all rejected.
  const std::string dir = ::testing::TempDir() + "/issue31_bench";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/Test---open.json");
    f << R"({"schema":{"type":"object"},"tests":[{"valid":true,"data":{"k":"v"}}]})";
  }
  MaskBenchOptions o;
  o.dir = dir;
  for (bool ws : {true, false}) {
    o.schema_opts.any_whitespace = ws;
    auto r = run_mask_benchmark(synthetic_vocabulary(), o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->total.ill_formed_tests, 8);
    EXPECT_EQ(r->total.wrongly_accepted, 0) << r->report();
    EXPECT_EQ(r->total.wrongly_rejected, 0) << r->report();
  }
}

// --- 3. Nothing to generate ------------------------------------------------------------------

TEST(EmptyLanguage, SchemasThatAllowNothingAreErrors) {
  for (const char* s : {R"({"$ref":"#"})", R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
                        R"(false)",
                        R"({"type":"object","required":["a"],"properties":{"a":{"$ref":"#/properties/a"}}})",
                        R"({"type":"array","minItems":1,"items":{"$ref":"#"}})"})
    expect_error(GrammarSpec::kJsonSchema, s, "no JSON value satisfies it");
  // With oneOf/not/if, which are lowered to sound subsets, an empty grammar may be ours: the
  // refusal says so (kUnsupported) instead of calling the schema unsatisfiable. The second is
  // satisfiable ({"g": "a"}), but the object cases of an overlapping oneOf only use value
  // reasons a plain schema states (enum/const/type), not string lengths (a gap, documented).
  for (const char* s : {R"({"not":{}})",
                        R"({"type":"object","properties":{"g":{"type":"string"}},"oneOf":[
                            {"properties":{"g":{"maxLength":1}},"required":["g"]},
                            {"properties":{"g":{"minLength":3}},"required":["g"]}]})"}) {
    CompileResult r = compile_spec(GrammarSpec::kJsonSchema, s);
    ASSERT_FALSE(r.is_ok()) << s;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
    EXPECT_NE(r.status().message().find("as this engine writes it"), std::string::npos) << r.status().message();
  }
}

TEST(EmptyLanguage, RegexesAndGrammarsThatMatchNothingAreErrors) {
  expect_error(GrammarSpec::kRegex, "[^\\s\\S]", "matches no string");
  expect_error(GrammarSpec::kRegex, "a^b", "matches no string");
  expect_error(GrammarSpec::kRegex, "x[^\\s\\S]+y", "matches no string");
  expect_error(GrammarSpec::kEbnf, "root ::= a\na ::= b\nb ::= a\n", "matches no string");
  expect_error(GrammarSpec::kEbnf, "root ::= \"x\" root\n", "matches no string");
  // One live alternative is enough, and the dead one is never offered.
  auto g = compile_spec(GrammarSpec::kEbnf, "root ::= \"a\" dead | \"b\"\ndead ::= \"c\" dead\n");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  GrammarMatcher m(*g);
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(testing::accepts(*g, "b"));
}

// JSONSchemaBench Github_easy o10011 and five more: an object oneOf whose branches narrow a
// property the outer schema declares with a type. The merge keeps the two property schemas as
// an allOf, whose enum the overlapping-oneOf cases did not see, so every case came out empty
// (before issue 31: a grammar that allowed only EOS).
TEST(EmptyLanguage, OneOfNarrowingADeclaredPropertyIsNotEmpty) {
  auto c = testing::compile_schema(R"({"type":"object","properties":{"g":{"type":"integer"}},"oneOf":[
      {"properties":{"g":{"enum":[1]}},"required":["g"]},
      {"properties":{"g":{"enum":[2]}},"required":["g"]}]})");
  ASSERT_TRUE(c.g);
  testing::expect_verdict(c, R"({"g":1})", true, true);
  testing::expect_verdict(c, R"({"g":2})", true, true);
  testing::expect_verdict(c, R"({"g":3})", false, true);
  testing::expect_verdict(c, R"({})", false, true);
}

TEST(EmptyLanguage, AnUnsatisfiablePropertyIsNotOffered) {
  auto g = testing::compile(R"({"type":"object","properties":{"a":{"$ref":"#/properties/a"},"b":{"type":"integer"}}})");
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept_bytes("{\"a\""));  // the name "a" exactly: its value has no instance
  EXPECT_TRUE(testing::accepts(g, "{\"ab\":1}"));  // an extra member
  EXPECT_TRUE(testing::accepts(g, "{\"b\":1}"));
  EXPECT_TRUE(testing::accepts(g, "{}"));
}

// Random walks through the mask: every state the matcher reaches offers a token (or is done).
void expect_no_dead_end(const std::shared_ptr<const CompiledGrammar>& g, int walks, uint32_t seed) {
  const TokenVocabulary& v = g->vocab();
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(v.mask_words());
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    for (int step = 0; step < 200 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask.data());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.size(); ++id)
        if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << "dead end after " << step << " tokens";
      int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
}

TEST(EmptyLanguage, RandomWalksNeverReachADeadEnd) {
  for (const char* s :
       {R"({"type":"object","properties":{"a":{"$ref":"#/properties/a"},"b":{"type":"integer"}},"additionalProperties":false})",
        R"({"type":"object","properties":{"a":{"$ref":"#/properties/a"},"b":{"type":"integer"}},"required":["b"]})",
        R"({"type":"object"})", R"({"anyOf":[{"$ref":"#"},{"type":"integer","maximum":3}]})",
        R"({"type":"array","items":{"anyOf":[{"type":"object","required":["x"],"properties":{"x":{"$ref":"#/items"}}},{"type":"boolean"}]}})"}) {
    // Compact, as generate and serve use: with free whitespace a dead value would still allow
    // blanks forever instead of an empty mask.
    JsonSchemaOptions compact;
    compact.any_whitespace = false;
    auto g = testing::compile(s, compact);
    ASSERT_TRUE(g) << s;
    expect_no_dead_end(g, 40, 31);
  }
}

// --- 4. Refusals with a general answer ----------------------------------------------------------

TEST(GeneralRefusals, MoreFormatsCompile) {
  auto dur = testing::compile(R"({"type":"string","format":"duration"})");
  ASSERT_TRUE(dur);
  for (const char* ok : {"\"P1D\"", "\"PT1H30M\"", "\"P1Y2M3DT4H5M6S\"", "\"P2W\"", "\"PT0S\""})
    EXPECT_TRUE(testing::accepts(dur, ok)) << ok;
  for (const char* bad : {"\"P\"", "\"PT\"", "\"1D\"", "\"P1H\"", "\"P1DT\"", "\"P1W2D\""})
    EXPECT_FALSE(testing::accepts(dur, bad)) << bad;
  auto ptr = testing::compile(R"({"type":"string","format":"json-pointer"})");
  ASSERT_TRUE(ptr);
  EXPECT_TRUE(testing::accepts(ptr, "\"/a~1b/~0/\""));
  EXPECT_TRUE(testing::accepts(ptr, "\"\""));
  EXPECT_FALSE(testing::accepts(ptr, "\"a\""));
  EXPECT_FALSE(testing::accepts(ptr, "\"/a~2\""));
  auto rel = testing::compile(R"({"type":"string","format":"relative-json-pointer"})");
  ASSERT_TRUE(rel);
  EXPECT_TRUE(testing::accepts(rel, "\"0#\""));
  EXPECT_TRUE(testing::accepts(rel, "\"12/a/b\""));
  EXPECT_FALSE(testing::accepts(rel, "\"01\""));
  EXPECT_FALSE(testing::accepts(rel, "\"/a\""));
  auto tpl = testing::compile(R"({"type":"string","format":"uri-template"})");
  ASSERT_TRUE(tpl);
  EXPECT_TRUE(testing::accepts(tpl, "\"http://x/{id}{?q,page:3}{/p*}\""));
  EXPECT_FALSE(testing::accepts(tpl, "\"http://x/{id\""));
  EXPECT_FALSE(testing::accepts(tpl, "\"a b\""));
  EXPECT_FALSE(testing::accepts(tpl, "\"{}\""));
}

TEST(GeneralRefusals, AnyOfWithOneOfIsTheirConjunction) {
  auto c = testing::compile_schema(
      R"({"anyOf":[{"type":"integer"},{"type":"string"}],"oneOf":[{"type":"integer","minimum":5},{"type":"string","maxLength":2},{"type":"integer","maximum":7}]})");
  ASSERT_TRUE(c.g);
  testing::expect_verdict(c, "3", true, true);
  testing::expect_verdict(c, "9", true, true);
  testing::expect_verdict(c, "6", false, true);  // both integer branches of the oneOf
  testing::expect_verdict(c, "\"ab\"", true, true);
  testing::expect_verdict(c, "\"abc\"", false, true);
  testing::expect_verdict(c, "true", false, true);
}

TEST(GeneralRefusals, DecimalStepsADoubleHoldsExactly) {
  auto c = testing::compile_schema(R"({"type":"number","multipleOf":2.5})");
  ASSERT_TRUE(c.g);
  testing::expect_verdict(c, "5", true, true);
  testing::expect_verdict(c, "-10", true, true);
  EXPECT_FALSE(testing::accepts(c.g, "3"));
  EXPECT_FALSE(testing::accepts(c.g, "7"));
  auto q = testing::compile_schema(R"({"type":"integer","multipleOf":0.25,"minimum":1,"maximum":3})");
  ASSERT_TRUE(q.g);
  testing::expect_verdict(q, "2", true, true);
  EXPECT_FALSE(testing::accepts(q.g, "4"));
  // A step a double cannot hold exactly is still refused, by name.
  testing::expect_refused(R"({"type":"number","multipleOf":0.3})", "multipleOf");
}

}  // namespace
}  // namespace deepinfer::structured
