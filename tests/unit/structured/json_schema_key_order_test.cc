// Any-order keys, more disjoint oneOf, non-spec formats, and the compile-time context precompute
// (masks equal to lazily computed ones, chains aliased).
#include <gtest/gtest.h>

#include "deepinfer/structured/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::synthetic_vocabulary;
using testing::walk_text;

std::shared_ptr<const CompiledGrammar> compile(const std::string& src, JsonSchemaOptions o = {},
                                               GrammarLimits limits = {}) {
  auto r = compile_grammar({GrammarSpec::kJsonSchema, src, o}, synthetic_vocabulary(), limits);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : nullptr;
}

bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  bool mismatch = false;
  bool ok = walk_text(g, text, &mismatch);
  EXPECT_FALSE(mismatch) << "mask disagrees with accept_token on '" << text << "'";
  return ok;
}

const char* kPerson = R"({"type":"object","properties":{"name":{"type":"string"},
    "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
    "required":["name","age"],"additionalProperties":false})";

TEST(GrammarJsonSchema, AnyOrderKeysIsAnOption) {
  auto ordered = compile(kPerson);
  EXPECT_TRUE(accepts(ordered, R"({"name":"a","age":1})"));
  EXPECT_FALSE(accepts(ordered, R"({"age":1,"name":"a"})"));  // default: schema order
  JsonSchemaOptions o;
  o.any_order_keys = true;
  auto any = compile(kPerson, o);
  EXPECT_TRUE(accepts(any, R"({"name":"a","age":1})"));
  EXPECT_TRUE(accepts(any, R"({"age":1,"name":"a"})"));
  EXPECT_TRUE(accepts(any, R"({"tags":["x"],"age":1,"name":"a"})"));
  EXPECT_TRUE(accepts(any, R"({"age": 1, "tags": [], "name": "a"})"));
  EXPECT_FALSE(accepts(any, R"({"age":1})"));                       // name is required
  EXPECT_FALSE(accepts(any, R"({"age":1,"name":"a","age":2})"));    // no repeats
  EXPECT_FALSE(accepts(any, R"({"age":"1","name":"a"})"));          // types still hold
  EXPECT_FALSE(accepts(any, R"({"name":"a","x":1,"age":1})"));      // closed object
}

TEST(GrammarJsonSchema, AnyOrderKeepsExtrasAfterDeclared) {
  JsonSchemaOptions o;
  o.any_order_keys = true;
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
                       "required":["a"],"additionalProperties":{"type":"string"}})", o);
  EXPECT_TRUE(accepts(g, R"({"b":2,"a":1,"z":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"b":2,"z":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":"2"})"));  // declared 'b' is not an extra
}

TEST(GrammarJsonSchema, OneOfObjectsToldApartByRequiredAndClosedLayouts) {
  // Branch 0 requires 'x', which branch 1 (closed) cannot hold: disjoint, so compiled.
  auto g = compile(R"({"oneOf":[
      {"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},
      {"type":"object","properties":{"y":{"type":"string"}},"additionalProperties":false}]})");
  EXPECT_TRUE(accepts(g, R"({"x":1})"));
  EXPECT_TRUE(accepts(g, R"({"y":"s"})"));
  EXPECT_TRUE(accepts(g, R"({})"));
  // Same required name with disjoint types: disjoint too.
  auto t = compile(R"({"oneOf":[
      {"type":"object","properties":{"v":{"type":"string"}},"required":["v"]},
      {"type":"object","properties":{"v":{"type":"integer"}},"required":["v"]}]})");
  EXPECT_TRUE(accepts(t, R"({"v":"a"})"));
  EXPECT_TRUE(accepts(t, R"({"v":3})"));
  // Overlapping object branches compile to "one and not the other" (round 3): branch 1 holds
  // every object, so exactly one matches iff 'x' is absent.
  auto o = compile(R"({"oneOf":[
      {"type":"object","required":["x"]},{"type":"object","properties":{"y":{}}}]})");
  EXPECT_TRUE(accepts(o, R"({"y":1})"));
  EXPECT_TRUE(accepts(o, R"({})"));
  EXPECT_FALSE(accepts(o, R"({"x":1})"));
  // Overlaps between numbers (round 4): integers below 2 match only the first branch;
  // integers from 2 up match both.
  auto n = compile(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})");
  EXPECT_TRUE(accepts(n, "1"));
  EXPECT_TRUE(accepts(n, R"("s")"));  // only the second branch
  EXPECT_FALSE(accepts(n, "3"));
  // Overlaps no complement can be written for are still refused.
  // Integers by remainder within bounds (round 5): exactly one of 2 | x, 3 | x.
  auto m = compile(R"({"type":"integer","minimum":0,"oneOf":[{"multipleOf":2},{"multipleOf":3}]})");
  EXPECT_TRUE(accepts(m, "4"));
  EXPECT_TRUE(accepts(m, "9"));
  EXPECT_FALSE(accepts(m, "6"));
  EXPECT_FALSE(accepts(m, "-4"));
  auto r = compile_grammar({GrammarSpec::kJsonSchema, R"({"type":"integer","minimum":0,
      "maximum":100000,"oneOf":[{"multipleOf":2},{"multipleOf":3}]})", {}}, synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("oneOf"), std::string::npos);
}

TEST(GrammarJsonSchema, FormatsOutsideTheSpecAreAnnotations) {
  auto g = compile(R"({"type":"string","format":"byte"})");
  EXPECT_TRUE(accepts(g, R"("anything")"));
  // A spec-defined format we do not implement is refused, never ignored.
  auto r = compile_grammar({GrammarSpec::kJsonSchema, R"({"type":"string","format":"idn-email"})", {}},
                           synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

// Masks from the precomputed contexts equal masks computed lazily, token by token.
TEST(GrammarPrecompute, MasksMatchLazyClassification) {
  const std::string schema = R"({"type":"object","properties":{
      "s":{"type":"string","maxLength":300},"n":{"type":"number","minimum":-5},
      "e":{"enum":["ab","abc",null]},"l":{"type":"array","items":{"type":"integer"},"minItems":1}},
      "required":["s","l"]})";
  GrammarLimits none;
  none.precompute_seconds = 0;
  auto eager = compile(schema);
  auto lazy = compile(schema, {}, none);
  ASSERT_TRUE(eager && lazy);
  EXPECT_TRUE(eager->context_stats().complete);
  EXPECT_GT(eager->context_stats().precomputed, 0u);
  EXPECT_EQ(lazy->context_stats().precomputed, 0u);
  const std::string text = std::string(R"({"s":"ab\"c)") + "\xc3\xa9t" + R"(","n":-1.5,"e":"abc","l":[1, 2]})";
  auto v = synthetic_vocabulary();
  auto ids = testing::greedy_tokenize(*v, text);
  ids.push_back(v->eos_ids[0]);
  GrammarMatcher a(eager), b(lazy);
  std::vector<uint32_t> ma(v->mask_words()), mb(v->mask_words());
  for (int32_t id : ids) {
    a.fill_next_token_bitmask(ma.data());
    b.fill_next_token_bitmask(mb.data());
    ASSERT_EQ(ma, mb) << "at token " << id;
    ASSERT_TRUE(a.accept_token(id));
    ASSERT_TRUE(b.accept_token(id));
  }
  EXPECT_TRUE(a.is_terminated());
  EXPECT_EQ(eager->context_stats().lazy, 0u);  // every context was ready before decoding
}

// A long counted run (maxLength 300) keeps exact length checks though its links share keys.
TEST(GrammarPrecompute, LongCountedRunsStayExact) {
  auto g = compile(R"({"type":"string","minLength":2,"maxLength":300})");
  EXPECT_FALSE(accepts(g, "\"a\""));
  EXPECT_TRUE(accepts(g, "\"" + std::string(300, 'a') + "\""));
  EXPECT_FALSE(accepts(g, "\"" + std::string(301, 'a') + "\""));
  EXPECT_TRUE(accepts(g, "\"" + std::string(299, 'b') + "\""));
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

TEST(GrammarJsonSchema, SingleClassPatternMeetsLengthBounds) {
  auto g = compile(R"({"type":"string","pattern":"^[a-c_]+$","minLength":2,"maxLength":4})");
  EXPECT_TRUE(accepts(g, R"("ab")"));
  EXPECT_TRUE(accepts(g, R"("a_cb")"));
  EXPECT_FALSE(accepts(g, R"("a")"));
  EXPECT_FALSE(accepts(g, R"("abcab")"));
  EXPECT_FALSE(accepts(g, R"("ad")"));
  auto q = compile(R"({"type":"string","pattern":"^(\\d{3,9})$","maxLength":4})");
  EXPECT_TRUE(accepts(q, R"("123")"));
  EXPECT_TRUE(accepts(q, R"("1234")"));
  EXPECT_FALSE(accepts(q, R"("12345")"));
  EXPECT_FALSE(accepts(q, R"("12")"));
  // Other patterns meet length bounds through the automaton intersection (round 3).
  auto r = compile(R"({"type":"string","pattern":"^a[b-z]*$","maxLength":3})");
  EXPECT_TRUE(accepts(r, R"("abz")"));
  EXPECT_FALSE(accepts(r, R"("abzz")"));
  EXPECT_FALSE(accepts(r, R"("bz")"));
}

}  // namespace
}  // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

TEST(GrammarJsonSchema, NotInDecidableCases) {
  auto g = compile(R"({"type":["string","integer","null"],"not":{"type":"integer"}})");
  EXPECT_TRUE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_FALSE(accepts(g, "1"));
  auto e = compile(R"({"enum":[1,"x",null],"not":{"type":["null","number"]}})");
  EXPECT_TRUE(accepts(e, R"("x")"));
  EXPECT_FALSE(accepts(e, "1"));
  EXPECT_FALSE(accepts(e, "null"));
  // Nothing satisfies it: a compile error (issue 31), not a grammar that only allows EOS.
  auto nothing = compile_grammar({GrammarSpec::kJsonSchema, R"({"not":{}})", {}}, synthetic_vocabulary());
  ASSERT_FALSE(nothing.is_ok());
  EXPECT_NE(nothing.status().message().find("no JSON value satisfies"), std::string::npos);
  // A $ref is resolved first (round 3): everything but strings.
  auto ref = compile(R"({"not":{"$ref":"#/$defs/a"},"$defs":{"a":{"type":"string"}}})");
  EXPECT_TRUE(accepts(ref, "null"));
  EXPECT_FALSE(accepts(ref, R"("a")"));
  // Cases with no exact grammar are refused, not ignored.
  for (const char* src : {R"({"type":"number","minimum":1,"not":{"type":"integer"}})",
                          R"({"not":{"multipleOf":2.5}})"}) {
    auto r = compile_grammar({GrammarSpec::kJsonSchema, src, {}}, synthetic_vocabulary());
    ASSERT_FALSE(r.is_ok()) << src;
    EXPECT_NE(r.status().message().find("'not'"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace deepinfer::structured
