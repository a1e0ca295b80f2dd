// Front ends (regex, EBNF, JSON Schema) and the matcher on small grammars: acceptance,
// rejection, mask/accept agreement, rollback, jump-forward, refusal messages.
#include <gtest/gtest.h>

#include "deepinfer/structured/ebnf_parser.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::synthetic_vocabulary;
using testing::walk_text;

std::shared_ptr<const CompiledGrammar> compile(GrammarSpec::Kind kind, const std::string& src,
                                               std::shared_ptr<const TokenVocabulary> v = nullptr) {
  GrammarSpec spec{kind, src, {}};
  auto r = compile_grammar(spec, v ? v : synthetic_vocabulary());
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  bool mismatch = false;
  bool ok = walk_text(g, text, &mismatch);
  EXPECT_FALSE(mismatch) << "mask disagrees with accept_token on '" << text << "'";
  return ok;
}

TEST(ByteSet, IntersectsOnlyWhenSharingAByte) {
  ByteSet quote, letters, high;
  quote.set('"');
  letters.set_range('a', 'z');
  high.set_range(0x80, 0xFF);
  EXPECT_FALSE(quote.intersects(letters));
  EXPECT_FALSE(letters.intersects(high));
  EXPECT_FALSE(ByteSet{}.intersects(high));
  ByteSet mixed = quote;
  mixed.set(0xFF);  // shares only the last bit of the last word
  EXPECT_TRUE(mixed.intersects(high));
  EXPECT_TRUE(high.intersects(mixed));
  mixed.set('q');
  EXPECT_TRUE(mixed.intersects(letters));
}

TEST(GrammarRegex, AcceptsAndRejects) {
  auto g = compile(GrammarSpec::kRegex, "a(b|cd)*e{2,3}[0-9]?");
  EXPECT_TRUE(accepts(g, "aee"));
  EXPECT_TRUE(accepts(g, "abcdbeee7"));
  EXPECT_FALSE(accepts(g, "ae"));
  EXPECT_FALSE(accepts(g, "aeeee"));
  EXPECT_FALSE(accepts(g, "abce"));
  auto u = compile(GrammarSpec::kRegex, "[^a-z]\\d+\\.?");
  EXPECT_TRUE(accepts(u, "\xe2\x82\xac" "12."));
  EXPECT_FALSE(accepts(u, "x12"));
}

TEST(GrammarRegex, RefusesLookaroundAndBackrefs) {
  for (const char* re : {"(?=a)b", "(a)\\1", "a\\b"}) {
    auto r = compile_grammar({GrammarSpec::kRegex, re, {}}, synthetic_vocabulary());
    ASSERT_FALSE(r.is_ok()) << re;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
  }
}

TEST(GrammarEbnf, ArithmeticAndErrors) {
  const char* src = R"EBNF(
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= [0-9]+ | "(" expr ")"   # nested
  )EBNF";
  auto g = compile(GrammarSpec::kEbnf, src);
  EXPECT_TRUE(accepts(g, "1+(23-4)"));
  EXPECT_FALSE(accepts(g, "1+"));
  EXPECT_FALSE(accepts(g, "(1"));
  auto bad = compile_ebnf("root ::= foo");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("foo"), std::string::npos);
  auto left = compile_ebnf("root ::= root \"a\" | \"b\"");
  ASSERT_FALSE(left.is_ok());
  EXPECT_NE(left.status().message().find("left-recursive"), std::string::npos);
}

TEST(GrammarJsonSchema, ObjectsInSchemaOrder) {
  auto g = compile(GrammarSpec::kJsonSchema, R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 4},
                   "age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
    "required": ["name"], "additionalProperties": false})");
  EXPECT_TRUE(accepts(g, R"({"name":"abc"})"));
  EXPECT_TRUE(accepts(g, R"({"name": "ab", "age": 149, "tags": ["a","b"]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"abcde"})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","age":150})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","age":-1})"));
  EXPECT_FALSE(accepts(g, R"({"age":3})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","tags":["a","b","a"]})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","x":1})"));
}

TEST(GrammarJsonSchema, AdditionalPropertiesExcludeDeclaredNames) {
  auto g = compile(GrammarSpec::kJsonSchema,
                   R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(accepts(g, R"({"ab":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":"x"})"));  // 'a' must be an integer, even as an extra
  EXPECT_FALSE(accepts(g, R"({"b":1})"));
}

TEST(GrammarJsonSchema, NumbersRefsAndUnions) {
  auto g = compile(GrammarSpec::kJsonSchema, R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "number", "minimum": -2.5,
              "maximum": 10}, "next": {"$ref": "#/$defs/node"}}, "required": ["v"],
              "additionalProperties": false}},
    "anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]})");
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, R"({"v":9.75,"next":{"v":-1.5}})"));
  EXPECT_TRUE(accepts(g, R"({"v":10})"));
  EXPECT_FALSE(accepts(g, R"({"v":10.5})"));
  EXPECT_FALSE(accepts(g, R"({"v":-3})"));
  EXPECT_FALSE(accepts(g, R"({"next":{"v":1}})"));
}

TEST(GrammarJsonSchema, RefusalNamesKeywordAndPointer) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema,
                            R"({"properties": {"x": {"not": {"multipleOf": 2.5}}}})", {}},
                           synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("'not'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("/properties/x/not"), std::string::npos) << r.status().message();
}

TEST(GrammarJsonSchema, FormatsAndPatterns) {
  auto g = compile(GrammarSpec::kJsonSchema,
                   R"({"type":"array","items":[{"format":"date","type":"string"},
                       {"type":"string","pattern":"^[a-z]+\"$"}]})");
  EXPECT_TRUE(accepts(g, R"(["2024-02-28","ab\""])"));
  EXPECT_FALSE(accepts(g, R"(["2024-02-30","ab\""])"));
  EXPECT_FALSE(accepts(g, R"(["2024-02-28","ab"])"));
}

TEST(GrammarMatcher, RollbackJumpForwardAndEos) {
  auto v = synthetic_vocabulary();
  auto g = compile(GrammarSpec::kJsonSchema,
                   R"({"type":"object","properties":{"name":{"const":"abc"}},"required":["name"]})", v);
  GrammarSpec spec{GrammarSpec::kJsonSchema, "", {}};
  GrammarMatcher m(g);
  EXPECT_EQ(m.find_jump_forward_string(), "");  // leading whitespace is allowed
  ASSERT_TRUE(m.accept_bytes("{"));
  ASSERT_TRUE(m.accept_bytes("\""));
  EXPECT_EQ(m.find_jump_forward_string(), "name\"");
  int32_t eos = v->eos_ids[0];
  EXPECT_FALSE(m.accept_token(eos));
  ASSERT_TRUE(m.accept_bytes("name\":\"abc\""));
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_TRUE(m.can_terminate());
  m.rollback(2);
  EXPECT_FALSE(m.can_terminate());
  std::vector<uint32_t> mask(v->mask_words());
  m.fill_next_token_bitmask(mask.data());
  EXPECT_FALSE((mask[eos >> 5] >> (eos & 31)) & 1);
  ASSERT_TRUE(m.accept_bytes("name\":\"abc\"}"));
  m.fill_next_token_bitmask(mask.data());
  EXPECT_TRUE((mask[eos >> 5] >> (eos & 31)) & 1);
  EXPECT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
}

TEST(GrammarCompiler, AsyncCacheSharesResults) {
  GrammarCompiler c(synthetic_vocabulary(), 2);
  GrammarSpec spec{GrammarSpec::kRegex, "[ab]+", {}};
  auto f1 = c.compile_async(spec);
  auto f2 = c.compile_async(spec);
  ASSERT_TRUE(f1.get().is_ok());
  EXPECT_EQ(f1.get().value().get(), f2.get().value().get());
  EXPECT_EQ(c.cache_size(), 1u);
  auto bad = c.compile_async({GrammarSpec::kEbnf, "root ::= (", {}});
  EXPECT_FALSE(bad.get().is_ok());
}

TEST(GrammarCompiler, SizeCapGivesClearError) {
  GrammarLimits limits;
  limits.max_elements = 1000;
  auto r = compile_grammar({GrammarSpec::kRegex, "(a{1000}){1000}", {}}, synthetic_vocabulary(), limits);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().message();
}

}  // namespace
}  // namespace deepinfer::structured
