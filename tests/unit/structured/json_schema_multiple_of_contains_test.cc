// Integer multipleOf with bounds as an automaton, two `contains` in one array, `not contains`, and
// a negated schema that covers the positive one. Every instance's expected verdict is checked
// against our validator first, then the grammar must agree (or, where the lowering is a documented
// sound subset, reject).
#include <gtest/gtest.h>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::synthetic_vocabulary;
using testing::walk_text;
using Json = nlohmann::ordered_json;

using Compiled = testing::SchemaUnderTest;
Compiled compile(const std::string& src) { return testing::compile_schema(src); }
bool accepts(const Compiled& c, const std::string& text) { return testing::accepts(c.g, text); }
// The validator agrees with `valid`, and so does the grammar.
void expect(const Compiled& c, const std::string& text, bool valid) {
  testing::expect_verdict(c, text, valid, /*enforce_formats=*/false);
}

// Valid by the validator, left out by the lowering (a sound subset).
void expect_left_out(const Compiled& c, const std::string& text) {
  InstanceValidator v(c.schema, false);
  EXPECT_EQ(v.validate(c.schema, Json::parse(text)), Verdict::kValid) << text;
  EXPECT_FALSE(accepts(c, text)) << text;
}

TEST(JsonSchemaMultipleOfContains, MultipleOfAboveAPositiveMinimum) {
  auto c = compile(R"({"type":"number","multipleOf":11,"minimum":100})");
  for (const char* ok : {"110", "121", "990", "1001", "1100", "123453", "99999999999999"})
    expect(c, ok, true);
  for (const char* bad : {"99", "0", "11", "-110", "111", "1000", "100", "-0"})
    expect(c, bad, false);
  EXPECT_FALSE(accepts(c, "0110"));  // not JSON
  expect_left_out(c, "110.0");       // integers only
  auto e = compile(R"({"type":"integer","multipleOf":4,"exclusiveMinimum":10,"maximum":9000})");
  for (const char* ok : {"12", "16", "100", "9000", "8996"}) expect(e, ok, true);
  for (const char* bad : {"8", "10", "14", "-12", "9004", "0", "90000"}) expect(e, bad, false);
}

TEST(JsonSchemaMultipleOfContains, NotOfMultipleOfWithBounds) {
  auto c = compile(R"({"type":"number","not":{"type":"number","multipleOf":11,"minimum":100}})");
  for (const char* ok : {"99", "0", "-0", "-110", "111", "5", "100", "1000", "-121"})
    expect(c, ok, true);
  for (const char* bad : {"110", "121", "1100", "990", "\"x\""}) expect(c, bad, false);
  expect_left_out(c, "1.5");  // non-integers have no grammar here
  // Below the minimum or not a multiple, with a negated maximum as well.
  auto d = compile(
      R"({"type":"integer","minimum":-30,"not":{"anyOf":[{"multipleOf":3},{"maximum":-20}]}})");
  for (const char* ok : {"-19", "-17", "1", "2", "4", "1000000001"}) expect(d, ok, true);
  for (const char* bad : {"-31", "-21", "-20", "-18", "0", "3", "999999999"}) expect(d, bad, false);
}

TEST(JsonSchemaMultipleOfContains, TwoContains) {
  auto c =
      compile(R"({"type":"array","allOf":[{"contains":{"const":1}},{"contains":{"const":2}}]})");
  for (const char* ok : {"[1, 2]", "[2, 3, 1]", "[0, 1, 0, 2, 0]"}) expect(c, ok, true);
  for (const char* bad : {"[]", "[1]", "[2, 2]", "[1, 1, 3]", "{}"}) expect(c, bad, false);
  // One item may meet both; item bounds count every item.
  auto b = compile(
      R"({"type":"array","maxItems":3,"items":{"type":"integer"},
          "allOf":[{"contains":{"minimum":5}},{"contains":{"multipleOf":2}}]})");
  for (const char* ok : {"[6]", "[5, 2]", "[1, 7, 4]"}) expect(b, ok, true);
  for (const char* bad : {"[5]", "[2, 4]", "[1, 7, 4, 1]", "[5, \"a\"]", "[]"})
    expect(b, bad, false);
}

TEST(JsonSchemaMultipleOfContains, NotContains) {
  auto c = compile(R"({"type":"array","not":{"contains":{"type":"string"}}})");
  for (const char* ok : {"[]", "[1, null]", "[[\"a\"]]"}) expect(c, ok, true);
  for (const char* bad : {"[\"a\"]", "[1, \"b\"]", "\"a\""}) expect(c, bad, false);
}

TEST(JsonSchemaMultipleOfContains, NegationCoveringThePositiveSchema) {
  // items X and not (items X): nothing, so a compile error (issue 31), not a grammar that only
  // allows EOS; the validator agrees that nothing is valid.
  const std::string none =
      R"({"type":"array","allOf":[{"items":{"type":"integer"}}],"not":{"items":{"type":"integer"}}})";
  InstanceValidator nv(Json::parse(none), false);
  for (const char* bad : {"[]", "[1]", "[\"a\"]", "1"})
    EXPECT_EQ(nv.validate(Json::parse(none), Json::parse(bad)), Verdict::kInvalid) << bad;
  auto c = compile_grammar({GrammarSpec::kJsonSchema, none, {}}, synthetic_vocabulary());
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("no JSON value satisfies"), std::string::npos);
  // A sibling the negated keyword depends on must agree: next to prefixItems, items says
  // nothing about the first item, so ["a"] is valid and the result must not be "nothing".
  // (It is refused today, at the `contains` that "not items" becomes next to prefixItems.)
  const std::string d =
      R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},
          "not":{"items":{"type":"integer"}}})";
  InstanceValidator v(Json::parse(d), false);
  EXPECT_EQ(v.validate(Json::parse(d), Json::parse(R"(["a", 1])")), Verdict::kValid);
  auto r = compile_grammar({GrammarSpec::kJsonSchema, d, {}}, synthetic_vocabulary());
  EXPECT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
}

TEST(JsonSchemaMultipleOfContains, AnchorRef) {
  // Draft 4 fragment ids (JSONSchemaBench Github_medium o35905) and 2019+ $anchor.
  auto c = compile(R"({"definitions":{"p":{"id":"#prio","type":"integer","minimum":0},
      "q":{"$anchor":"name","type":"string","maxLength":2}},
      "type":"object","properties":{"a":{"$ref":"#prio"},"b":{"$ref":"#name"}}})");
  EXPECT_TRUE(accepts(c, R"({"a": 3, "b": "xy"})"));
  EXPECT_FALSE(accepts(c, R"({"a": -1})"));
  EXPECT_FALSE(accepts(c, R"({"b": "xyz"})"));
  // Ambiguous, missing, or under a subschema that changes the base URI: refused.
  for (
      const char* src :
      {R"({"definitions":{"p":{"$anchor":"x"},"q":{"$anchor":"x"}},"$ref":"#x"})",
       R"({"$ref":"#nowhere"})",
       R"({"definitions":{"p":{"$id":"other.json","$defs":{"q":{"$anchor":"x"}}}},"$ref":"#x"})"}) {
    auto r = compile_grammar({GrammarSpec::kJsonSchema, src, {}}, synthetic_vocabulary());
    ASSERT_FALSE(r.is_ok()) << src;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().message();
    EXPECT_NE(r.status().message().find("anchor"), std::string::npos) << r.status().message();
  }
}

TEST(JsonSchemaMultipleOfContains, NumbersThatAreNotIntegers) {
  // JSONSchemaBench Github_trivial o41599: integers match two branches, so only the
  // non-integers are left of `number` (spelled without exponent: a sound subset).
  auto c = compile(
      R"({"oneOf":[{"type":"integer"},{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"null"}]})");
  for (const char* ok : {"1.5", "-0.25", "10.01", "0.10", "\"s\"", "true", "null"})
    expect(c, ok, true);
  for (const char* bad : {"1", "0", "-3", "1.0", "2.000", "[]", "{}"}) expect(c, bad, false);
  expect(c, "1.5e1", false);         // 15
  expect_left_out(c, "1.5e-1");      // every exponent is left out
  EXPECT_FALSE(accepts(c, "01.5"));  // not JSON
  auto d = compile(R"({"type":"number","not":{"type":"integer"}})");
  expect(d, "3.25", true);
  expect(d, "3", false);
}

// JSONSchemaBench Handwritten/oneofitemscontains3: exactly one of "every item contains N and
// some item is all N" and "every item is all N and some item contains N", N = multiples of 11
// from 100. Worked out by hand: either every item contains an N, one is all N (non-empty) and
// one holds a non-N; or every item is all N, one is non-empty and one is [].
TEST(JsonSchemaMultipleOfContains, OneOfItemsContains) {
  auto c = compile(R"({
    "type": "array",
    "oneOf": [
      {"allOf": [{"items": {"$ref": "#/definitions/inside1"}},
                 {"contains": {"$ref": "#/definitions/inside2"}}]},
      {"allOf": [{"items": {"$ref": "#/definitions/inside2"}},
                 {"contains": {"$ref": "#/definitions/inside1"}}]}
    ],
    "definitions": {
      "inside1": {"type": "array", "contains": {"type": "number", "multipleOf": 11, "minimum": 100}},
      "inside2": {"type": "array", "items": {"type": "number", "multipleOf": 11, "minimum": 100}}
    }
  })");
  for (const char* ok :
       {"[[110], [110, 1]]", "[[121, \"x\"], [220, 330]]", "[[110], [-110, 110]]", "[[110], []]",
        "[[], [110, 121], []]", "[[110, null], [99, 110, {}], [440]]", "[[], [], [1100]]"})
    expect(c, ok, true);
  for (const char* bad : {"[]", "[[110]]", "[[110], [121]]", "[[110, 1]]", "[[110], [99]]",
                          "[[110], [1]]", "[[]]", "[[110], [], [110, 1]]", "[[111], [110, 5]]",
                          "[[110], [110, 1], 3]", "[[110], [110, 1], []]", "{}", "110"})
    expect(c, bad, false);
  expect_left_out(c, "[[110], [110, 1.5]]");  // non-integer numbers are left out of "not N"
}

}  // namespace
}  // namespace deepinfer::structured
