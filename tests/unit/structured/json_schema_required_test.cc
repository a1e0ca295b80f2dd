// Required names that `properties` does not declare (issue 6): they are written with the
// schema that governs them (every matching patternProperties schema, else
// additionalProperties) and never a second time as an extra member. Every instance's expected
// verdict is checked against our validator first, then the grammar must agree.
#include <gtest/gtest.h>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using Compiled = testing::SchemaUnderTest;
Compiled compile(const std::string& src) { return testing::compile_schema(src); }
bool accepts(const Compiled& c, const std::string& text) { return testing::accepts(c.g, text); }
void expect(const Compiled& c, const std::string& text, bool valid) {
  testing::expect_verdict(c, text, valid, /*enforce_formats=*/true);
}

// Only a pattern admits the required name (additionalProperties false): it used to admit no
// object at all.
TEST(GrammarJsonSchemaRequired, NameOnlyAPatternAdmits) {
  auto c = compile(
      R"({"patternProperties": {"^[a-e]$": true}, "additionalProperties": false,
          "required": ["a"]})");
  expect(c, R"({"a": 1})", true);
  expect(c, R"({"a": 1, "b": "x", "e": null})", true);
  expect(c, R"({})", false);
  expect(c, R"({"b": 1})", false);
  expect(c, R"({"a": 1, "f": 2})", false);
  expect(c, R"({"a": 1, "ab": 2})", false);
  // Written once, in its place: never again as a pattern member.
  EXPECT_FALSE(accepts(c, R"({"a": 1, "a": 2})"));
  EXPECT_FALSE(accepts(c, R"({"a": 1, "b": 2, "a": 3})"));
}

// The required name must satisfy the schemas of every pattern it matches, and nothing else.
TEST(GrammarJsonSchemaRequired, AllMatchingPatternsApply) {
  auto c = compile(
      R"({"type": "object",
          "patternProperties": {"^x": {"type": "integer"}, "y$": {"minimum": 5}},
          "additionalProperties": {"type": "string"}, "required": ["x1", "xy"]})");
  expect(c, R"({"x1": 0, "xy": 5})", true);
  expect(c, R"({"x1": -3, "xy": 70, "xz": 1, "q": "s", "ay": 9.5})", true);
  expect(c, R"({"x1": 0, "xy": 4})", false);
  expect(c, R"({"x1": 0, "xy": 5.5})", false);
  expect(c, R"({"x1": "s", "xy": 5})", false);
  expect(c, R"({"x1": 0})", false);
  expect(c, R"({"xy": 5})", false);
  expect(c, R"({"x1": 0, "xy": 5, "q": 1})", false);
  EXPECT_FALSE(accepts(c, R"({"x1": 0, "xy": 5, "xy": 6})"));
  EXPECT_FALSE(accepts(c, R"({"x1": 0, "xy": 5, "x1": 1})"));
}

// No pattern matches: additionalProperties (a schema) governs the required name.
TEST(GrammarJsonSchemaRequired, NameAdditionalPropertiesGoverns) {
  auto c = compile(
      R"({"properties": {"p": {"type": "integer"}}, "patternProperties": {"^z": {"type": "null"}},
          "additionalProperties": {"type": "string"}, "required": ["q"]})");
  expect(c, R"({"q": "s"})", true);
  expect(c, R"({"p": 1, "q": "s", "r": "t", "z": null})", true);
  expect(c, R"({"q": 1})", false);
  expect(c, R"({"p": 1})", false);
  expect(c, R"({"q": "s", "r": 2})", false);
  expect(c, R"({"q": "s", "z": 0})", false);
  EXPECT_FALSE(accepts(c, R"({"q": "s", "q": "t"})"));

  auto plain = compile(
      R"({"properties": {"p": {"type": "integer"}}, "additionalProperties": {"type": "string"},
          "required": ["q"]})");
  expect(plain, R"({"p": 1, "q": "s", "r": "t"})", true);
  expect(plain, R"({"q": 1})", false);
  expect(plain, R"({"p": 1})", false);
  EXPECT_FALSE(accepts(plain, R"({"q": "s", "q": "t"})"));
}

// Neither a pattern nor additionalProperties admits the name, or propertyNames rules it out:
// no object is valid, and none is accepted.
TEST(GrammarJsonSchemaRequired, NameNothingAdmits) {
  auto c = compile(
      R"({"patternProperties": {"^a": true}, "additionalProperties": false, "required": ["b"]})");
  for (const char* bad : {R"({})", R"({"b": 1})", R"({"a": 1})", R"({"a": 1, "b": 2})"})
    expect(c, bad, false);
  auto named = compile(
      R"({"patternProperties": {"^a": true}, "propertyNames": {"maxLength": 1},
          "required": ["ab"]})");
  for (const char* bad : {R"({})", R"({"ab": 1})", R"({"a": 1})"}) expect(named, bad, false);
}

// Dependencies among names only patterns admit.
TEST(GrammarJsonSchemaRequired, DependentNamesOnlyAPatternAdmits) {
  auto c = compile(
      R"({"patternProperties": {"^[a-c]$": {"type": "integer"}}, "additionalProperties": false,
          "dependencies": {"a": ["b"]}})");
  expect(c, R"({"a": 1, "b": 2})", true);
  expect(c, R"({"b": 1})", true);
  expect(c, R"({"b": 1, "c": 2})", true);
  expect(c, R"({"a": 1})", false);
  expect(c, R"({"a": 1, "b": "x"})", false);
  expect(c, R"({"a": 1, "c": 2})", false);
  EXPECT_FALSE(accepts(c, R"({"a": 1, "b": 2, "b": 3})"));
}

}  // namespace
}  // namespace deepinfer::structured
