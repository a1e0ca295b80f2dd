// `contains`, `not` over arrays, conjunctions of keywords that allOf used to refuse, and format
// `regex`. Each case includes instances a looser lowering would wrongly accept.
#include <gtest/gtest.h>

#include "deepinfer/structured/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::accepts;
using testing::compile;
using testing::expect_refused;
using testing::synthetic_vocabulary;
using testing::walk_text;

TEST(JsonSchemaContainsAllOf, Contains) {
  auto g = compile(R"({"type":"array","items":{"type":"integer"},"contains":{"minimum":10}})");
  EXPECT_TRUE(accepts(g, "[10]"));
  EXPECT_TRUE(accepts(g, "[1, 2, 30, 4]"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "[1, 2]"));      // no item >= 10
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

TEST(JsonSchemaContainsAllOf, NotOverArrays) {
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

TEST(JsonSchemaContainsAllOf, NotOverNumbers) {
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
  // not multipleOf next to bounds: a remainder automaton within the bounds (round 5).
  auto m = compile(R"({"type":"integer","minimum":0,"not":{"multipleOf":3}})");
  EXPECT_TRUE(accepts(m, "4"));
  EXPECT_FALSE(accepts(m, "6"));
  EXPECT_FALSE(accepts(m, "-4"));
  expect_refused(R"({"type":"integer","minimum":0,"not":{"multipleOf":2.5}})", "not");
}

TEST(JsonSchemaContainsAllOf, MultipleOfCombinationsByRemainder) {
  // Multiples of 2 or of 3 but not both: remainders mod 6 in {2, 3, 4}.
  auto g = compile(R"({"type":"integer","oneOf":[{"multipleOf":2},{"multipleOf":3}]})");
  for (const char* ok : {"2", "3", "4", "9", "-8", "1000", "-15"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"0", "1", "6", "-12", "25", "007", "-"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  // not, allOf and $ref together (the JSONSchemaBench allany8 shape, smaller).
  auto h = compile(R"({"type":"number","allOf":[{"$ref":"#/$defs/a"},{"not":{"multipleOf":4}}],
      "$defs":{"a":{"anyOf":[{"multipleOf":3},{"multipleOf":5}]}}})");
  for (const char* ok : {"3", "5", "6", "10", "-30"}) EXPECT_TRUE(accepts(h, ok)) << ok;
  for (const char* bad : {"0", "12", "20", "7", "1.5"}) EXPECT_FALSE(accepts(h, bad)) << bad;
}

TEST(JsonSchemaContainsAllOf, AllOfConjoinsWhatItUsedToRefuse) {
  // Two patterns: both must match somewhere (one pattern with a lookahead).
  auto p = compile(R"({"type":"string","allOf":[{"pattern":"^a"},{"pattern":"[0-9]$"}]})");
  EXPECT_TRUE(accepts(p, R"("ab1")"));
  EXPECT_FALSE(accepts(p, R"("ab")"));
  EXPECT_FALSE(accepts(p, R"("b1")"));
  auto three = compile(R"({"type":"string","allOf":[{"pattern":"^a"},{"pattern":"[0-9]$"},
      {"pattern":"x"}]})");
  EXPECT_TRUE(accepts(three, R"("ax1")"));
  EXPECT_FALSE(accepts(three, R"("ab1")"));
  // Two integer multipleOfs: multiples of their lcm.
  auto lcm = compile(R"({"type":"integer","allOf":[{"multipleOf":4},{"multipleOf":6}]})");
  EXPECT_TRUE(accepts(lcm, "24"));
  EXPECT_TRUE(accepts(lcm, "12"));
  EXPECT_FALSE(accepts(lcm, "8"));
  EXPECT_FALSE(accepts(lcm, "18"));
  // Two anyOfs: some branch of each.
  auto any = compile(R"({"allOf":[{"anyOf":[{"type":"integer"},{"type":"string"}]},
      {"anyOf":[{"minimum":5},{"type":"null"}]}]})");
  EXPECT_TRUE(accepts(any, "7"));
  EXPECT_TRUE(accepts(any, R"("s")"));  // minimum says nothing about strings
  EXPECT_FALSE(accepts(any, "3"));
  EXPECT_FALSE(accepts(any, "null"));
  // Two oneOfs: exactly one branch of each.
  auto one = compile(R"({"allOf":[{"oneOf":[{"type":"integer"},{"type":"string"}]},
      {"oneOf":[{"type":"integer","maximum":3},{"type":"string","maxLength":1}]}]})");
  EXPECT_TRUE(accepts(one, "2"));
  EXPECT_TRUE(accepts(one, R"("s")"));
  EXPECT_FALSE(accepts(one, "4"));
  EXPECT_FALSE(accepts(one, R"("st")"));
  // Two if/then/else.
  auto ifs = compile(R"({"type":"integer","allOf":[
      {"if":{"minimum":10},"then":{"maximum":15}},
      {"if":{"maximum":20},"then":{"minimum":0},"else":{"const":25}}]})");
  EXPECT_TRUE(accepts(ifs, "12"));
  EXPECT_TRUE(accepts(ifs, "3"));
  EXPECT_FALSE(accepts(ifs, "16"));  // >= 10 and > 15
  EXPECT_FALSE(accepts(ifs, "-1"));  // <= 20 and negative
  EXPECT_FALSE(accepts(ifs, "24"));  // > 20 and not 25
  // Two nots: neither may match.
  // (Each negated schema names its type: {"maximum": 0} alone matches every string.)
  auto nots = compile(R"({"type":["integer","string"],"allOf":[
      {"not":{"type":"integer","maximum":0}},{"not":{"type":"integer","minimum":10}},
      {"not":{"type":"string","pattern":"x"}},{"not":{"enum":["a"]}}]})");
  EXPECT_TRUE(accepts(nots, "5"));
  EXPECT_TRUE(accepts(nots, R"("b")"));
  EXPECT_FALSE(accepts(nots, "0"));
  EXPECT_FALSE(accepts(nots, "10"));
  EXPECT_FALSE(accepts(nots, R"("ax")"));
  EXPECT_FALSE(accepts(nots, R"("a")"));
  // Pattern properties of both sides apply (the same pattern: both schemas).
  auto pp = compile(R"({"type":"object","allOf":[
      {"patternProperties":{"^a":{"type":"integer"},"^b":{"type":"integer"}}},
      {"patternProperties":{"^a":{"minimum":0},"c$":{"type":"string"}}}]})");
  EXPECT_TRUE(accepts(pp, R"({"a1":1,"bx":2,"xc":"s"})"));
  EXPECT_FALSE(accepts(pp, R"({"a1":-1})"));
  EXPECT_FALSE(accepts(pp, R"({"bc":"s"})"));  // ^b says integer, c$ says string
  EXPECT_FALSE(accepts(pp, R"({"xc":1})"));
}

TEST(JsonSchemaContainsAllOf, AllOfKeepsAdditionalPropertiesToItsOwnBranch) {
  // One branch forbids every name; the other's patternProperties cannot exempt "xa" from it
  // (refused until round 6, which rewrites the first branch's additionalProperties as a
  // pattern property of its own).
  auto f = compile(R"({"allOf":[{"type":"object","additionalProperties":false},
      {"patternProperties":{"^x":{}}}]})");
  EXPECT_TRUE(accepts(f, "{}"));
  EXPECT_FALSE(accepts(f, R"({"xa":1})"));
  EXPECT_FALSE(accepts(f, R"({"b":1})"));
  // A declared name of one branch that the other branch's pattern matches is governed by the
  // pattern there, not by that branch's additionalProperties.
  auto g = compile(R"({"type":"object","allOf":[
      {"patternProperties":{"^x":{"type":"integer"}},"additionalProperties":false},
      {"properties":{"xa":{"minimum":1},"b":{}}}]})");
  EXPECT_TRUE(accepts(g, R"({"xa":2})"));
  EXPECT_FALSE(accepts(g, R"({"xa":0})"));
  EXPECT_FALSE(accepts(g, R"({"xa":"s"})"));
  EXPECT_FALSE(accepts(g, R"({"b":1})"));  // not matched by ^x: additionalProperties false
}

TEST(JsonSchemaContainsAllOf, FormatRegexIsASubsetOfValidPatterns) {
  auto g = compile(R"({"type":"string","format":"regex"})");
  // Instances are JSON text, so a regex backslash is written \\ here.
  for (const char* ok : {R"J("^[a-zA-Z0-9_]{3,16}$")J", R"J("^[a-zA-Z0-9]+$")J", R"J("")J",
                         R"J("a|b|")J", R"J("^(\\+|-)?([0-9]+(\\.[0-9]*)?)$")J", R"J("[^]x*?")J",
                         R"J("(?:ab){2,}\\d{0,9}")J", R"J("\\/[\\-.]")J"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  // Invalid patterns: a lone quantifier, a trailing backslash, unbalanced or out-of-order
  // constructs, quantified anchors, backreferences (not in the subset).
  for (const char* bad :
       {R"J("*")J", R"J("\\")J", R"J("(a")J", R"J("a)")J", R"J("a{2,1}")J", R"J("[z-a]")J",
        R"J("a**")J", R"J("^*")J", R"J("a{")J", R"J("]")J", R"J("(a)\\1")J", R"J("[a")J"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  // enforce_formats=false: any string.
  JsonSchemaOptions off;
  off.enforce_formats = false;
  auto any = compile(R"({"type":"string","format":"regex"})", off);
  EXPECT_TRUE(accepts(any, R"("*")"));
}

TEST(JsonSchemaContainsAllOf, BoundedMultipleOf) {
  // Few values between the bounds: the values themselves, shortest spelling.
  auto q = compile(R"({"type":"number","minimum":0,"maximum":100,"multipleOf":0.25})");
  for (const char* ok : {"0", "0.25", "0.5", "99.75", "100", "7"})
    EXPECT_TRUE(accepts(q, ok)) << ok;
  for (const char* bad : {"0.3", "-0.25", "100.25", "0.125", "101"})
    EXPECT_FALSE(accepts(q, bad)) << bad;
  auto x = compile(R"({"type":"integer","exclusiveMinimum":10,"maximum":40,"multipleOf":10})");
  EXPECT_TRUE(accepts(x, "20"));
  EXPECT_TRUE(accepts(x, "40"));
  EXPECT_FALSE(accepts(x, "10"));
  EXPECT_FALSE(accepts(x, "25"));
  // Only a lower bound of 0: the non-negative multiples.
  auto n = compile(R"({"type":"integer","minimum":0,"multipleOf":12})");
  EXPECT_TRUE(accepts(n, "0"));
  EXPECT_TRUE(accepts(n, "1200"));
  EXPECT_FALSE(accepts(n, "-12"));
  EXPECT_FALSE(accepts(n, "13"));
  auto pos = compile(R"({"type":"integer","exclusiveMinimum":0,"multipleOf":12})");
  EXPECT_FALSE(accepts(pos, "0"));
  EXPECT_TRUE(accepts(pos, "24"));
  // A positive lower bound without an upper one: an automaton (round 5).
  auto five = compile(R"({"type":"integer","minimum":5,"multipleOf":3})");
  EXPECT_TRUE(accepts(five, "6"));
  EXPECT_TRUE(accepts(five, "3000000"));
  EXPECT_FALSE(accepts(five, "3"));
  EXPECT_FALSE(accepts(five, "7"));
  // Too many values, or bounds too large to spell out: still refused.
  expect_refused(R"({"type":"integer","minimum":0,"maximum":100000,"multipleOf":3})", "multipleOf");
  expect_refused(R"({"type":"integer","minimum":500000,"multipleOf":3})", "multipleOf");
}

}  // namespace
}  // namespace deepinfer::structured
