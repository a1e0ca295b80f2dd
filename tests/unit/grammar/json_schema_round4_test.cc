// Round 4 (issue 6, fewer refusals): `contains`, `not` over arrays, conjunctions of keywords
// that allOf used to refuse, and format `regex`. Each case includes instances a looser
// lowering would wrongly accept.
#include <gtest/gtest.h>

#include "deepinfer/engine/grammar/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::engine::grammar {
namespace {

using testing::synthetic_vocabulary;
using testing::walk_text;

std::shared_ptr<const CompiledGrammar> compile(const std::string& src, JsonSchemaOptions o = {}) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, src, o}, synthetic_vocabulary());
  EXPECT_TRUE(r.is_ok()) << src << ": " << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  if (!g) return false;
  bool mismatch = false;
  bool ok = walk_text(g, text, &mismatch);
  EXPECT_FALSE(mismatch) << "mask disagrees with accept_token on '" << text << "'";
  return ok;
}

void expect_refused(const std::string& src, const std::string& keyword) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, src, {}}, synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok()) << src;
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
  EXPECT_NE(r.status().message().find(keyword), std::string::npos) << r.status().message();
}

TEST(GrammarJsonSchemaRound4, Contains) {
  auto g = compile(R"({"type":"array","items":{"type":"integer"},"contains":{"minimum":10}})");
  EXPECT_TRUE(accepts(g, "[10]"));
  EXPECT_TRUE(accepts(g, "[1, 2, 30, 4]"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "[1, 2]"));     // no item >= 10
  EXPECT_FALSE(accepts(g, "[1, \"x\"]"));  // items still apply
  EXPECT_FALSE(accepts(g, "[10, \"x\"]"));
  // Item bounds count every item, the contained one included.
  auto b = compile(R"({"type":"array","contains":{"const":"a"},"minItems":3,"maxItems":4})");
  EXPECT_TRUE(accepts(b, R"(["a", 1, 2])"));
  EXPECT_TRUE(accepts(b, R"([1, 2, 3, "a"])"));
  EXPECT_FALSE(accepts(b, R"(["a", 1])"));
  EXPECT_FALSE(accepts(b, R"([1, 2, 3, 4, "a"])"));
  EXPECT_FALSE(accepts(b, R"([1, 2, 3])"));
  auto open = compile(R"({"type":"array","contains":{"type":"null"},"minItems":2})");
  EXPECT_TRUE(accepts(open, "[1, 2, 3, null]"));
  EXPECT_FALSE(accepts(open, "[null]"));
  expect_refused(R"({"type":"array","contains":{"type":"null"},"minContains":2})", "minContains");
  expect_refused(R"({"type":"array","contains":{"type":"null"},"uniqueItems":true})", "contains");
}

TEST(GrammarJsonSchemaRound4, NotOverArrays) {
  // not {items: not X} == contains X (the JSONSchemaBench "@context" case).
  auto g = compile(R"({"type":"array","not":{"items":{"not":{"enum":["ctx"]}}}})");
  EXPECT_TRUE(accepts(g, R"(["a", "ctx"])"));
  EXPECT_FALSE(accepts(g, R"(["a", "b"])"));
  EXPECT_FALSE(accepts(g, "[]"));
  // Too few items, too many, or an item failing `items`.
  auto n = compile(R"({"type":"array","items":{"type":"integer"},
      "not":{"items":{"minimum":0},"minItems":1,"maxItems":2}})");
  EXPECT_TRUE(accepts(n, "[]"));
  EXPECT_TRUE(accepts(n, "[1, 2, 3]"));
  EXPECT_TRUE(accepts(n, "[1, -2]"));
  EXPECT_FALSE(accepts(n, "[1, 2]"));
  EXPECT_FALSE(accepts(n, "[5]"));
  EXPECT_FALSE(accepts(n, "[1, 2, \"x\"]"));  // the outer items still hold
  // Every string matches {minItems: 1}, so `not` drops strings; only the empty array is left.
  auto t = compile(R"({"type":["array","string"],"not":{"minItems":1}})");
  EXPECT_TRUE(accepts(t, "[]"));
  EXPECT_FALSE(accepts(t, R"("s")"));
  EXPECT_FALSE(accepts(t, "[1]"));
  expect_refused(R"({"type":"array","not":{"uniqueItems":true}})", "not");
}

TEST(GrammarJsonSchemaRound4, NotOverNumbers) {
  auto g = compile(R"({"type":"integer","minimum":0,"not":{"minimum":3,"exclusiveMaximum":7}})");
  EXPECT_TRUE(accepts(g, "2"));
  EXPECT_TRUE(accepts(g, "7"));
  EXPECT_FALSE(accepts(g, "3"));
  EXPECT_FALSE(accepts(g, "6"));
  EXPECT_FALSE(accepts(g, "-1"));  // the outer minimum
  // Draft 4 boolean exclusives: not (x > 2) == x <= 2.
  auto d4 = compile(R"({"type":"number","not":{"minimum":2,"exclusiveMinimum":true}})");
  EXPECT_TRUE(accepts(d4, "2"));
  EXPECT_TRUE(accepts(d4, "-5"));
  EXPECT_FALSE(accepts(d4, "3"));
  // not {type: integer, ...} over numbers: non-integers are left out (a sound subset).
  auto i = compile(R"({"type":"number","not":{"type":"integer","maximum":0}})");
  EXPECT_TRUE(accepts(i, "4"));
  EXPECT_FALSE(accepts(i, "-4"));
  expect_refused(R"({"type":"integer","not":{"multipleOf":3}})", "not");
}

}  // namespace
}  // namespace deepinfer::engine::grammar
