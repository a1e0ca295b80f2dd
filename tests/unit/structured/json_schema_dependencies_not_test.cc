// Schema-valued dependencies that only say which trigger names are present, string languages under
// nested not/anyOf/allOf/$ref, and `not` next to if/then/else. Every instance's expected verdict is
// checked against our validator first, then the grammar must agree (or, where the lowering is a
// documented sound subset, reject).
#include <gtest/gtest.h>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::synthetic_vocabulary;
using Json = nlohmann::ordered_json;

using Compiled = testing::SchemaUnderTest;
Compiled compile(const std::string& src) { return testing::compile_schema(src); }
bool accepts(const Compiled& c, const std::string& text) { return testing::accepts(c.g, text); }
Verdict verdict(const Compiled& c, const std::string& text) {
  return testing::validator_verdict(c, text, /*enforce_formats=*/true);
}
// The validator agrees with `valid`, and so does the grammar.
void expect(const Compiled& c, const std::string& text, bool valid) {
  testing::expect_verdict(c, text, valid, /*enforce_formats=*/true);
}

// Invalid by the validator, and never accepted (soundness).
void expect_rejected(const Compiled& c, const std::string& text) {
  EXPECT_EQ(verdict(c, text), Verdict::kInvalid) << text;
  EXPECT_FALSE(accepts(c, text)) << text;
}

// Five schema-valued dependencies among the names a..e (JSONSchemaBench Handwritten dep6):
// only the presence sets {a, b, d} satisfy them with three names or more.
constexpr const char* kFiveDependencies = R"({
  "type": "object", "patternProperties": {"^[a-e]$": true}, "additionalProperties": false,
  "allOf": [{"dependencies": {
      "a": {"anyOf": [{"required": ["c"]}, {"required": ["b"]}]},
      "b": {"not": {"required": ["c"]}},
      "c": {"not": {"required": ["d"]}},
      "d": {"not": {"required": ["e"]}},
      "e": {"not": {"required": ["a"]}}}},
    {"required": ["a"]}],
  "minProperties": 3})";

TEST(JsonSchemaDependenciesNot, DependenciesOverTriggerNames) {
  auto c = compile(kFiveDependencies);
  expect(c, R"({"a": 1, "b": "x", "d": null})", true);
  for (const char* bad :
       {R"({"a": 1, "b": 2, "c": 3})", R"({"a": 1, "b": 2})", R"({"a": 1, "b": 2, "d": 3, "e": 4})",
        R"({"a": 1, "d": 2, "e": 3})", R"({"a": 1, "c": 2, "e": 3})", R"({"b": 1, "d": 2, "e": 3})",
        R"({"a": 1, "b": 2, "d": 3, "f": 4})", R"([1, 2, 3])"})
    expect_rejected(c, bad);
}

// The same with maxProperties 2 (dep7): {a, b} and {a, c} are the only objects.
TEST(JsonSchemaDependenciesNot, DependenciesWithFewNames) {
  std::string src = kFiveDependencies;
  src.replace(src.find("\"minProperties\": 3"), 18, "\"maxProperties\": 2");
  auto c = compile(src);
  expect(c, R"({"a": 1, "b": 2})", true);
  expect(c, R"({"a": [], "c": {}})", true);
  for (const char* bad : {R"({"a": 1})", R"({"a": 1, "d": 2})", R"({"a": 1, "e": 2})",
                          R"({"b": 1, "c": 2})", R"({"a": 1, "b": 2, "d": 3})", R"({})"})
    expect_rejected(c, bad);
}

// A dependent schema that also constrains values stays in its cases as a schema; one that
// names a non-trigger property is not evaluated (the object lowering enforces it).
TEST(JsonSchemaDependenciesNot, DependenciesMixedWithValues) {
  auto c = compile(R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"},
                   "d": {"type": "integer"}, "x": {"type": "string"}},
    "additionalProperties": false,
    "dependencies": {
      "a": {"required": ["x"], "properties": {"x": {"const": "A"}}},
      "b": {"not": {"required": ["a"]}},
      "c": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
      "d": {"oneOf": [{"required": ["a"]}, {"required": ["c"]}]}}})");
  for (const char* ok :
       {R"({})", R"({"a": 1, "x": "A"})", R"({"b": 1, "c": 2})", R"({"a": 1, "c": 2, "x": "A"})",
        R"({"b": 1, "c": 2, "d": 3})", R"({"x": "z"})"})
    expect(c, ok, true);
  for (const char* bad : {R"({"a": 1})", R"({"a": 1, "x": "B"})", R"({"a": 1, "b": 2, "x": "A"})",
                          R"({"c": 1})", R"({"d": 1})", R"({"a": 1, "c": 2, "d": 3, "x": "A"})"})
    expect_rejected(c, bad);
}

TEST(JsonSchemaDependenciesNot, DependenciesPastTheTriggerCap) {
  Json deps = Json::object();
  for (int i = 0; i < 13; ++i)
    deps[std::string(1, static_cast<char>('a' + i))] =
        Json{{"properties", Json{{"z", Json{{"type", "integer"}}}}}};
  testing::expect_refused(Json{{"type", "object"}, {"dependencies", deps}}.dump(), "dependencies");
}

// `not` over strings whose negated schemas nest not/anyOf/allOf and $ref (Handwritten
// allany19 in small): the string language is their boolean combination.
TEST(JsonSchemaDependenciesNot, NotOfNestedStringCombinations) {
  auto c = compile(R"({
    "type": "string", "maxLength": 8,
    "anyOf": [{"$ref": "#/definitions/n1"}, {"$ref": "#/definitions/n2"}],
    "definitions": {
      "n1": {"not": {"anyOf": [{"$ref": "#/definitions/short"}, {"pattern": "b"}]}},
      "n2": {"not": {"allOf": [{"pattern": "^x"}, {"not": {"pattern": "y$"}}]}},
      "short": {"pattern": "^..?$"}}})");
  // n1: at least 3 characters and no b. n2: not (starts with x and does not end with y).
  for (const char* ok : {R"("aaa")", R"("b")", R"("xay")", R"("xbby")", R"("xaaa")", R"("")"})
    expect(c, ok, true);
  for (const char* bad : {R"("xb")", R"("xbbb")", R"("xx")", R"("aaaaaaaaa")", R"(12)"})
    expect_rejected(c, bad);
}

// A negated subschema of another type has no strings: `not {type: integer}` inside keeps all.
TEST(JsonSchemaDependenciesNot, NotOfNestedTypedSubschema) {
  auto c = compile(R"({"type": "string",
    "not": {"anyOf": [{"not": {"anyOf": [{"type": "integer"}, {"pattern": "^q"}]}},
                      {"pattern": "z"}]}})");
  // not (not (integer or ^q) or z) == (starts with q) and no z.
  for (const char* ok : {R"("q")", R"("qabc")"}) expect(c, ok, true);
  for (const char* bad : {R"("abc")", R"("qz")", R"("")", R"(5)"}) expect_rejected(c, bad);
}

// `not` in an else branch whose own if/then/else follows (Github_hard o73817): the
// conditional is split into its cases first.
TEST(JsonSchemaDependenciesNot, NotNextToIfThenElse) {
  auto c = compile(R"({
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": ["p", "a"]}, "x": {"type": "integer"},
                   "y": {"type": "integer"}},
    "required": ["kind"], "additionalProperties": false,
    "if": {"properties": {"kind": {"enum": ["p"]}}},
    "then": {"required": ["x"]},
    "else": {"if": {"properties": {"kind": {"enum": ["a"]}}}, "then": {"required": ["y"]},
             "else": {}}})");
  for (const char* ok :
       {R"({"kind": "p", "x": 1})", R"({"kind": "a", "y": 2})", R"({"kind": "a", "x": 1, "y": 2})"})
    expect(c, ok, true);
  for (const char* bad : {R"({"kind": "p"})", R"({"kind": "a"})", R"({"kind": "a", "x": 1})",
                          R"({"kind": "z", "x": 1, "y": 1})", R"({"x": 1})"})
    expect_rejected(c, bad);
}

// oneOf whose branches are anyOf over arrays (Handwritten oneofanyofitc1): the negated
// branch's siblings (type) distribute into its anyOf, so each alternative is complemented
// by the array reasons (an item failing `items`, no item matching `contains`).
TEST(JsonSchemaDependenciesNot, OverlappingOneOfOfArrayUnions) {
  auto c = compile(R"({
    "type": "array",
    "oneOf": [{"anyOf": [{"items": {"$ref": "#/definitions/i1"}},
                         {"contains": {"$ref": "#/definitions/i2"}}]},
              {"anyOf": [{"items": {"$ref": "#/definitions/i2"}},
                         {"contains": {"$ref": "#/definitions/i1"}}]}],
    "definitions": {
      "i1": {"type": "array", "contains": {"type": "number", "multipleOf": 11, "minimum": 100}},
      "i2": {"type": "array", "items": {"type": "number", "multipleOf": 4}}}})");
  // Only the first: an item of i2, none of i1, one not of i2. Only the second: an item of
  // i1, none of i2, one not of i1.
  for (const char* ok :
       {R"([[4], "x"])", R"([[110, 1], "x"])", R"([[8, 12], 5])", R"([[4, 110], "x"])"}) {
    EXPECT_EQ(verdict(c, ok), Verdict::kValid) << ok;
    if (!accepts(c, ok)) ADD_FAILURE() << "valid and rejected: " << ok;
  }
  for (const char* bad :
       {R"([])", R"([[110]])", R"([[4]])", R"([[4], [110]])", R"([[4], "x", [110, 1]])", R"(["x"])",
        R"([[4], [8]])", R"([[110, 4]])", R"({"a": 1})"})
    expect_rejected(c, bad);
}

}  // namespace
}  // namespace deepinfer::structured
