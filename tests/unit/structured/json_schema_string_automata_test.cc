// String languages as code-point automata (pattern + length bounds, pattern + format, several
// patternProperties and their interplay with declared and additional properties). Each case
// includes instances a naive lowering would wrongly accept.
#include <gtest/gtest.h>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/grammar_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using testing::accepts;
using testing::compile;
using testing::synthetic_vocabulary;
using testing::walk_text;

CodePointDfa pattern(const std::string& p, bool search = true) {
  auto d = dfa_from_pattern(p, search);
  EXPECT_TRUE(d.is_ok()) << d.status().message();
  return d.is_ok() ? *d : CodePointDfa{};
}

TEST(CodePointDfa, MatchesLikeTheRegex) {
  CodePointDfa d = pattern("^[a-z]+(-[a-z]+)*$");
  EXPECT_TRUE(dfa_matches(d, "ab-cd"));
  EXPECT_FALSE(dfa_matches(d, "ab-"));
  EXPECT_FALSE(dfa_matches(d, "-ab"));
  CodePointDfa s = pattern("x[0-9]");  // search: anywhere in the string
  EXPECT_TRUE(dfa_matches(s, "aax7bb"));
  EXPECT_FALSE(dfa_matches(s, "aaxbb"));
  CodePointDfa u = pattern("^\u00e9.$");  // code points, not bytes
  EXPECT_TRUE(dfa_matches(u, "\u00e9\u4e2d"));
  EXPECT_FALSE(dfa_matches(u, "\u00e9ab"));
}

TEST(CodePointDfa, ProductDifferenceAndLength) {
  CodePointDfa a = pattern("^a"), b = pattern("b$");
  auto only_a = dfa_product({&a, &b}, [](const std::vector<bool>& m) { return m[0] && !m[1]; });
  ASSERT_TRUE(only_a.is_ok());
  EXPECT_TRUE(dfa_matches(*only_a, "ax"));
  EXPECT_FALSE(dfa_matches(*only_a, "axb"));
  EXPECT_FALSE(dfa_matches(*only_a, "xa"));
  auto neither = dfa_product({&a, &b}, [](const std::vector<bool>& m) { return !m[0] && !m[1]; });
  ASSERT_TRUE(neither.is_ok());
  EXPECT_TRUE(dfa_matches(*neither, ""));
  EXPECT_TRUE(dfa_matches(*neither, "\u4e2d"));
  EXPECT_FALSE(dfa_matches(*neither, "ab"));
  auto names = dfa_of_strings({"id", "\u00e9t\u00e9"});
  ASSERT_TRUE(names.is_ok());
  EXPECT_TRUE(dfa_matches(*names, "\u00e9t\u00e9"));
  EXPECT_FALSE(dfa_matches(*names, "i"));
  auto len = dfa_with_length(a, 2, 3);
  ASSERT_TRUE(len.is_ok());
  EXPECT_TRUE(dfa_matches(*len, "a\u4e2d"));  // two code points, four bytes
  EXPECT_FALSE(dfa_matches(*len, "a"));
  EXPECT_FALSE(dfa_matches(*len, "abcd"));
  EXPECT_EQ(dfa_length_range(pattern("^[0-9]{2,5}$")), std::make_pair(int64_t{2}, int64_t{5}));
  EXPECT_EQ(dfa_length_range(pattern("^a+$")).second, -1);
  EXPECT_TRUE(dfa_is_empty(
      *dfa_product({&a, &a}, [](const std::vector<bool>& m) { return m[0] && !m[1]; })));
}

TEST(CodePointDfa, StateCapIsARefusal) {
  // The 14th character from the end must be 'a': 2^14 deterministic states.
  auto d = dfa_from_pattern("^[ab]*a[ab]{13}$", true);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(d.status().message().find("states"), std::string::npos);
}

TEST(GrammarJsonSchema, PatternMeetsLengthBounds) {
  // Unanchored: some digit somewhere, 3 or 4 characters in all.
  auto g = compile(R"({"type":"string","pattern":"[0-9]","minLength":3,"maxLength":4})");
  EXPECT_TRUE(accepts(g, R"("ab1")"));
  EXPECT_TRUE(accepts(g, R"("1bcd")"));
  EXPECT_FALSE(accepts(g, R"("abc")"));    // length fine, no digit
  EXPECT_FALSE(accepts(g, R"("a1bcd")"));  // digit, too long
  EXPECT_FALSE(accepts(g, R"("1")"));
  // Lengths count code points of the decoded string, not escapes or UTF-8 bytes.
  auto e = compile(R"({"type":"string","pattern":"^x","maxLength":3})");
  EXPECT_TRUE(accepts(e, "\"x\\n\u00e9\""));
  EXPECT_FALSE(accepts(e, "\"x\\n\u00e9a\""));
}

TEST(GrammarJsonSchema, PatternMeetsFormat) {
  auto g = compile(R"({"type":"string","format":"date","pattern":"^2024-"})");
  EXPECT_TRUE(accepts(g, R"("2024-02-28")"));
  EXPECT_FALSE(accepts(g, R"("2023-02-28")"));  // a date, wrong pattern
  EXPECT_FALSE(accepts(g, R"("2024-13-01")"));  // the pattern, not a date
  auto m = compile(R"({"type":"string","format":"email","maxLength":8})");
  EXPECT_TRUE(accepts(m, R"("a@b.io")"));
  EXPECT_FALSE(accepts(m, R"("abcd@b.io")"));
  EXPECT_FALSE(accepts(m, R"("abcdefg")"));
}

TEST(GrammarJsonSchema, SeveralPatternProperties) {
  auto g = compile(R"({"type":"object","patternProperties":{"^a":{"type":"integer"},
      "b$":{"type":"string"}},"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"ax":1,"xb":"s"})"));
  EXPECT_TRUE(accepts(g, R"({})"));
  EXPECT_FALSE(accepts(g, R"({"ab":1})"));  // matches both: must be integer and string
  EXPECT_FALSE(accepts(g, R"({"ab":"s"})"));
  EXPECT_FALSE(accepts(g, R"({"c":1})"));  // matches none, additionalProperties false
  EXPECT_FALSE(accepts(g, R"({"xb":1})"));
}

TEST(GrammarJsonSchema, PatternPropertiesWithAdditionalSchema) {
  auto g = compile(R"({"type":"object","patternProperties":{"^x-":{"type":"string"}},
      "additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(accepts(g, R"({"x-a":"s","b":1})"));
  EXPECT_FALSE(accepts(g, R"({"x-a":1})"));  // matched names do not fall back to additional
  EXPECT_FALSE(accepts(g, R"({"b":"s"})"));
  // additionalProperties absent: unmatched names take any value, matched ones must conform.
  auto open = compile(R"({"type":"object","patternProperties":{"^[0-9]+$":{"type":"boolean"}}})");
  EXPECT_TRUE(accepts(open, R"({"12":true,"a":[1]})"));
  EXPECT_FALSE(accepts(open, R"({"12":"yes"})"));
}

TEST(GrammarJsonSchema, DeclaredNamesAlsoMeetMatchingPatterns) {
  auto g = compile(R"({"type":"object","properties":{"x-id":{"type":"string","maxLength":3}},
      "patternProperties":{"^x-":{"type":"string","minLength":2}}})");
  EXPECT_TRUE(accepts(g, R"({"x-id":"ab"})"));
  EXPECT_FALSE(accepts(g, R"({"x-id":"a"})"));  // declared schema alone would allow it
  EXPECT_FALSE(accepts(g, R"({"x-id":"abcd"})"));
  EXPECT_TRUE(accepts(g, R"({"x-id":"ab","x-z":"cd","y":null})"));
  EXPECT_FALSE(accepts(g, R"({"x-id":"ab","x-z":"c"})"));
  // A required name that is not declared takes the matching pattern's schema.
  auto r = compile(
      R"({"type":"object","required":["x-a"],"patternProperties":{"^x-":{"type":"integer"}}})");
  EXPECT_TRUE(accepts(r, R"({"x-a":1})"));
  EXPECT_FALSE(accepts(r, R"({"x-a":"s"})"));
  EXPECT_FALSE(accepts(r, R"({})"));
}

TEST(GrammarJsonSchema, PatternPropertyNamesNeedingEscapes) {
  auto g = compile(R"({"type":"object","patternProperties":{"^q\"":{"type":"integer"}},
      "additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"q\"z":1})"));
  EXPECT_FALSE(accepts(g, R"({"qz":1})"));
  EXPECT_FALSE(accepts(g, R"({"q\"z":"s"})"));
}

TEST(GrammarJsonSchema, DependenciesBringTheirNames) {
  // "card" needs "billing" (which comes later) and "zip" needs "city" (which comes earlier).
  auto g = compile(R"({"type":"object","properties":{"name":{"type":"string"},
      "city":{"type":"string"},"zip":{"type":"string"},"card":{"type":"integer"},
      "billing":{"type":"string"}},"required":["name"],
      "dependencies":{"card":["billing"],"zip":{"required":["city"]}},"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"name":"a"})"));
  EXPECT_TRUE(accepts(g, R"({"name":"a","card":1,"billing":"b"})"));
  EXPECT_TRUE(accepts(g, R"({"name":"a","billing":"b"})"));  // dependents alone are fine
  EXPECT_TRUE(accepts(g, R"({"name":"a","city":"c","zip":"z"})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","card":1})"));  // trigger without its dependent
  EXPECT_FALSE(accepts(g, R"({"name":"a","zip":"z"})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","zip":"z","card":1})"));
  // dependentRequired (2019-09+) and a `false` dependency schema (the name may not appear).
  auto d = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
      "c":{"type":"integer"}},"dependentRequired":{"a":["b"]},"dependentSchemas":{"c":false}})");
  EXPECT_TRUE(accepts(d, R"({"a":1,"b":2,"x":true})"));
  EXPECT_FALSE(accepts(d, R"({"a":1})"));
  EXPECT_FALSE(accepts(d, R"({"c":1})"));
}

TEST(GrammarJsonSchema, DependenciesOnUndeclaredNames) {
  // Undeclared names in dependencies take a place in the layout (after the declared ones)
  // with the additionalProperties schema, so they are never produced blindly as extras.
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"}},
      "additionalProperties":{"type":"string"},"dependencies":{"q":["a"],"a":["zz"]}})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"zz":"z"})"));
  EXPECT_TRUE(accepts(g, R"({"a":1,"zz":"z","q":"x","other":"o"})"));
  EXPECT_TRUE(accepts(g, R"({"other":"o"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));    // a needs zz
  EXPECT_FALSE(accepts(g, R"({"q":"x"})"));  // q needs a
  EXPECT_FALSE(accepts(g, R"({"zz":"z","q":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"zz":2})"));  // zz is still an additional member
  // Closed object: a dependent that can never appear forbids its trigger.
  auto c = compile(R"({"type":"object","properties":{"a":{},"b":{}},"additionalProperties":false,
      "dependencies":{"a":["zz"]}})");
  EXPECT_TRUE(accepts(c, R"({"b":1})"));
  EXPECT_FALSE(accepts(c, R"({"a":1})"));
}

TEST(GrammarJsonSchema, SchemaValuedDependenciesAsCases) {
  // (a absent) or (a present and the object matches the dependency schema).
  auto g = compile(R"({"type":"object","properties":{"a":{}},
      "dependencies":{"a":{"properties":{"b":{"type":"string"}}}}})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(accepts(g, R"({"b":2})"));  // no trigger: b is unconstrained
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":2})"));
  auto m = compile(
      R"({"type":"object","properties":{"a":{}},"dependentSchemas":{"a":{"minProperties":2}}})");
  EXPECT_TRUE(accepts(m, R"({"a":1,"x":2})"));
  EXPECT_TRUE(accepts(m, R"({"x":2})"));
  EXPECT_FALSE(accepts(m, R"({"a":1})"));
  // More than three schema-valued dependencies (2^k cases) are refused by name.
  auto r = compile_grammar({GrammarSpec::kJsonSchema,
                            R"({"type":"object","dependentSchemas":{
      "a":{"minProperties":2},"b":{"minProperties":2},"c":{"minProperties":2},"d":{"minProperties":2}}})",
                            {}},
                           synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("dependencies"), std::string::npos) << r.status().message();
}

TEST(GrammarJsonSchema, MultipleOf) {
  auto three = compile(R"({"type":"integer","multipleOf":3})");
  EXPECT_TRUE(accepts(three, "0"));
  EXPECT_TRUE(accepts(three, "1234567890"));  // digit sum 45
  EXPECT_TRUE(accepts(three, "-27"));
  EXPECT_FALSE(accepts(three, "1234567891"));
  EXPECT_FALSE(accepts(three, "10"));
  EXPECT_FALSE(accepts(three, "03"));
  auto cents = compile(R"({"type":"number","multipleOf":0.01})");
  EXPECT_TRUE(accepts(cents, "12.34"));
  EXPECT_TRUE(accepts(cents, "-7"));
  EXPECT_FALSE(accepts(cents, "12.345"));
  EXPECT_FALSE(accepts(cents, "1e-3"));
  // 10^-d with bounds: the bounded number grammar with at most d decimals.
  auto price = compile(R"({"type":"number","multipleOf":0.01,"minimum":0,"maximum":10})");
  EXPECT_TRUE(accepts(price, "9.99"));
  EXPECT_TRUE(accepts(price, "10"));
  EXPECT_FALSE(accepts(price, "9.999"));
  EXPECT_FALSE(accepts(price, "10.5"));
  EXPECT_FALSE(accepts(price, "-0.5"));
  // Integer steps with bounds past the remainder automaton, and steps a double cannot hold
  // exactly, are refused (0.25 is taken since issue 31: hostile_input_test.cc).
  for (const char* src : {R"({"type":"integer","multipleOf":12,"minimum":100000})",
                          R"({"type":"number","multipleOf":0.3})"}) {
    auto r = compile_grammar({GrammarSpec::kJsonSchema, src, {}}, synthetic_vocabulary());
    ASSERT_FALSE(r.is_ok()) << src;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << src;
  }
}

TEST(GrammarJsonSchema, OverlappingOneOfOverRequiredSets) {
  // Exactly one of the required sets may be complete.
  auto g = compile(R"({"type":"object","properties":{"radius":{"type":"number"},
      "length":{"type":"number"},"width":{"type":"number"}},
      "oneOf":[{"required":["radius"]},{"required":["length","width"]}]})");
  EXPECT_TRUE(accepts(g, R"({"radius":1})"));
  EXPECT_TRUE(accepts(g, R"({"length":1,"width":2})"));
  EXPECT_TRUE(accepts(g, R"({"radius":1,"length":1})"));             // second set incomplete
  EXPECT_FALSE(accepts(g, R"({"radius":1,"length":1,"width":2})"));  // both match
  EXPECT_FALSE(accepts(g, R"({"length":1})"));                       // neither matches
  EXPECT_FALSE(accepts(g, R"({})"));
}

TEST(GrammarJsonSchema, OverlappingOneOfToldApartByValues) {
  // 'shape' is optional in both branches, so an object without it may match both.
  auto g = compile(R"({"type":"object","oneOf":[
      {"properties":{"shape":{"const":"circle"},"radius":{"type":"number"}},"required":["radius"]},
      {"properties":{"shape":{"const":"square"},"side":{"type":"number"}},"required":["side"]}]})");
  EXPECT_TRUE(accepts(g, R"({"shape":"circle","radius":1})"));
  EXPECT_TRUE(accepts(g, R"({"radius":1})"));
  EXPECT_TRUE(accepts(g, R"({"shape":"circle","radius":1,"side":2})"));  // branch 1 fails on shape
  EXPECT_FALSE(accepts(g, R"({"radius":1,"side":2})"));                  // matches both
  EXPECT_FALSE(accepts(g, R"({"shape":"square","radius":1})"));
  // A property typed differently in the two branches tells them apart when present.
  auto t = compile(R"({"oneOf":[{"type":"object","properties":{"v":{"type":"string"}}},
      {"type":"object","properties":{"v":{"type":["string","integer"]}},"required":["v"]}]})");
  EXPECT_TRUE(accepts(t, R"({})"));          // only branch 0 (branch 1 requires v)
  EXPECT_TRUE(accepts(t, R"({"v":3})"));     // only branch 1
  EXPECT_FALSE(accepts(t, R"({"v":"a"})"));  // both
}

TEST(GrammarJsonSchema, OverlappingOneOfWithClosedLayouts) {
  // An object with 'b' cannot match the closed branch 0; without 'b' both may match.
  auto g = compile(R"({"oneOf":[
      {"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false},
      {"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}]})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":2})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  EXPECT_FALSE(accepts(g, R"({})"));
}

TEST(GrammarJsonSchema, OverlappingOneOfOverStrings) {
  // Unanchored patterns overlap: "customer-admin" matches both, so it is excluded.
  auto g = compile(R"({"type":"string","oneOf":[{"pattern":"customer"},{"pattern":"admin"}]})");
  EXPECT_TRUE(accepts(g, R"("a customer")"));
  EXPECT_TRUE(accepts(g, R"("admin")"));
  EXPECT_FALSE(accepts(g, R"("customer-admin")"));
  EXPECT_FALSE(accepts(g, R"("nobody")"));
  // Length bounds and formats take part too; type-less branches give strings only.
  auto l = compile(R"({"oneOf":[{"maxLength":3},{"format":"ipv4"}]})");
  EXPECT_TRUE(accepts(l, R"("abc")"));
  EXPECT_TRUE(accepts(l, R"("10.0.0.1")"));
  EXPECT_FALSE(accepts(l, R"("abcd")"));
  EXPECT_FALSE(accepts(l, "1"));  // a number matches both branches
  auto e = compile(R"({"oneOf":[{"enum":["a","b","c"]},{"type":"string","pattern":"^[bc]"}]})");
  EXPECT_TRUE(accepts(e, R"("a")"));
  EXPECT_TRUE(accepts(e, R"("bz")"));
  EXPECT_FALSE(accepts(e, R"("b")"));
  // Overlapping numbers (round 4): only (2, 5] matches exactly one branch.
  auto n = compile(R"({"type":"number","oneOf":[{"maximum":2},{"maximum":5}]})");
  EXPECT_TRUE(accepts(n, "3"));
  EXPECT_TRUE(accepts(n, "5"));
  EXPECT_FALSE(accepts(n, "2"));
  EXPECT_FALSE(accepts(n, "6"));
}

TEST(GrammarJsonSchema, LengthBoundsPastTheStateCapAreTightened) {
  // email x maxLength 1024 exceeds the automaton cap; the bound is tightened, never dropped.
  auto g = compile(R"({"type":"string","format":"email","maxLength":1024})");
  EXPECT_TRUE(accepts(g, R"("a.b@example.com")"));
  EXPECT_FALSE(accepts(g, R"("not an email")"));
  EXPECT_FALSE(accepts(g, "\"" + std::string(1100, 'a') + "@b.io\""));
}

TEST(GrammarJsonSchema, PropertyCountsWithOptionalProperties) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
      "c":{"type":"integer"}},"minProperties":2,"maxProperties":3})");
  EXPECT_TRUE(accepts(g, R"({"a":1,"c":3})"));
  EXPECT_TRUE(accepts(g, R"({"b":2,"x":true})"));  // extras count too
  EXPECT_TRUE(accepts(g, R"({"a":1,"b":2,"c":3})"));
  EXPECT_FALSE(accepts(g, R"({"a":1})"));
  EXPECT_FALSE(accepts(g, R"({})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":2,"c":3,"x":4})"));
  // Closed, with a required name: at least one optional one must join it.
  auto c = compile(R"({"type":"object","properties":{"id":{"type":"string"},"p":{},"q":{}},
      "required":["id"],"minProperties":2,"additionalProperties":false})");
  EXPECT_TRUE(accepts(c, R"({"id":"x","q":1})"));
  EXPECT_FALSE(accepts(c, R"({"id":"x"})"));
}

TEST(GrammarJsonSchema, EnumValuesAreDecidedByValidation) {
  auto n = compile(
      R"({"allOf":[{"enum":[1,2.5,"x",true]},{"not":{"anyOf":[{"type":"integer"},{"type":"number","minimum":2}]}}]})");
  EXPECT_TRUE(accepts(n, R"("x")"));
  EXPECT_TRUE(accepts(n, "true"));
  EXPECT_FALSE(accepts(n, "1"));    // an integer
  EXPECT_FALSE(accepts(n, "2.5"));  // >= 2
  auto p = compile(R"({"enum":["ab","b1","c"],"pattern":"^[a-z]+$","minLength":2})");
  EXPECT_TRUE(accepts(p, R"("ab")"));
  EXPECT_FALSE(accepts(p, R"("b1")"));
  EXPECT_FALSE(accepts(p, R"("c")"));
  auto m = compile(R"({"enum":[3,4,9,0.5],"multipleOf":3})");
  EXPECT_TRUE(accepts(m, "9"));
  EXPECT_FALSE(accepts(m, "4"));
  EXPECT_FALSE(accepts(m, "0.5"));
  auto o = compile(
      R"({"enum":[{"a":1},{"a":"s"},{"b":1}],"required":["a"],"properties":{"a":{"type":"integer"}}})");
  EXPECT_TRUE(accepts(o, R"({"a":1})"));
  EXPECT_FALSE(accepts(o, R"({"a":"s"})"));
  EXPECT_FALSE(accepts(o, R"({"b":1})"));
  // oneOf counts matches: 6 is a multiple of both.
  auto one = compile(R"({"enum":[2,3,6],"oneOf":[{"multipleOf":2},{"multipleOf":3}]})");
  EXPECT_TRUE(accepts(one, "2"));
  EXPECT_TRUE(accepts(one, "3"));
  EXPECT_FALSE(accepts(one, "6"));
  auto u = compile(R"({"enum":[[1,2],[1,1]],"uniqueItems":true})");
  EXPECT_TRUE(accepts(u, "[1,2]"));
  EXPECT_FALSE(accepts(u, "[1,1]"));
  // A keyword the validator does not implement keeps the refusal.
  auto r = compile_grammar(
      {GrammarSpec::kJsonSchema, R"({"enum":[{"a":1}],"unevaluatedProperties":false})", {}},
      synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(GrammarJsonSchema, RecursionThroughRefWithSiblings) {
  // The $ref has a sibling keyword, so it is merged rather than called; the merged schema is
  // still one rule, so the recursion terminates.
  auto g = compile(R"({"$ref":"#/definitions/node","definitions":{"node":{"type":"object",
      "properties":{"name":{"type":"string"},"children":{"type":"object",
      "additionalProperties":{"type":"object","$ref":"#/definitions/node"}}},"required":["name"]}}})");
  EXPECT_TRUE(accepts(g, R"({"name":"a","children":{"x":{"name":"b","children":{}}}})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","children":{"x":{"children":{}}}})"));
}

TEST(GrammarJsonSchema, UniqueItems) {
  // A small enum domain is exact: one rule per set of values already written.
  auto e =
      compile(R"({"type":"array","items":{"enum":["r","g","b"]},"uniqueItems":true,"minItems":2})");
  EXPECT_TRUE(accepts(e, R"(["r","b"])"));
  EXPECT_TRUE(accepts(e, R"(["b","g","r"])"));
  EXPECT_FALSE(accepts(e, R"(["r","r"])"));
  EXPECT_FALSE(accepts(e, R"(["g"])"));
  auto b = compile(R"({"type":"array","items":{"type":"boolean"},"uniqueItems":true})");
  EXPECT_TRUE(accepts(b, "[true,false]"));
  EXPECT_FALSE(accepts(b, "[true,true]"));
  // Unbounded item domains: at most one item (trivially unique), never a duplicate.
  auto s = compile(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})");
  EXPECT_TRUE(accepts(s, R"(["a"])"));
  EXPECT_TRUE(accepts(s, "[]"));
  EXPECT_FALSE(accepts(s, R"(["a","a"])"));
  auto r = compile_grammar(
      {GrammarSpec::kJsonSchema,
       R"({"type":"array","items":{"type":"string"},"uniqueItems":true,"minItems":2})",
       {}},
      synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(GrammarJsonSchema, NotTypeByType) {
  auto str = compile(R"({"type":"string","pattern":"^[a-z]+$","not":{"enum":["test","source"]}})");
  EXPECT_TRUE(accepts(str, R"("tests")"));
  EXPECT_FALSE(accepts(str, R"("test")"));
  auto pat = compile(R"({"type":"string","not":{"pattern":"^tmp"}})");
  EXPECT_TRUE(accepts(pat, R"("a-tmp")"));
  EXPECT_FALSE(accepts(pat, R"("tmp1")"));
  auto port =
      compile(R"({"type":"integer","minimum":1024,"maximum":65535,"not":{"enum":[6379,6380]}})");
  EXPECT_TRUE(accepts(port, "6378"));
  EXPECT_TRUE(accepts(port, "6381"));
  EXPECT_FALSE(accepts(port, "6379"));
  EXPECT_FALSE(accepts(port, "6380"));
  EXPECT_FALSE(accepts(port, "80"));
  auto obj =
      compile(R"({"type":"object","properties":{"a":{},"b":{}},"not":{"required":["a","b"]}})");
  EXPECT_TRUE(accepts(obj, R"({"a":1})"));
  EXPECT_TRUE(accepts(obj, R"({"b":1})"));
  EXPECT_FALSE(accepts(obj, R"({"a":1,"b":2})"));
  // Without a type, every type is complemented on its own: not {required} holds for no
  // non-object, not {minLength: 2} for strings of length < 2 and everything else.
  auto any = compile(R"({"not":{"type":["string","number"],"minLength":2}})");
  EXPECT_TRUE(accepts(any, R"("a")"));
  EXPECT_TRUE(accepts(any, "null"));
  EXPECT_FALSE(accepts(any, R"("ab")"));
  auto r = compile_grammar(
      {GrammarSpec::kJsonSchema, R"({"type":"array","not":{"uniqueItems":true}})", {}},
      synthetic_vocabulary());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(GrammarJsonSchema, UriReferenceFormat) {
  auto g = compile(R"({"type":"string","format":"uri-reference"})");
  for (const char* ok :
       {R"("")", R"("a/b")", R"("../x")", R"("/x?y#z")", R"("http://h:80/p?q")", R"("#frag")"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {R"("1:b")", R"("a b")", R"("a#b#c")", R"("%zz")", R"("//host")"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(GrammarJsonSchema, IfThenElseAsTwoCases) {
  auto g = compile(R"({"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{}},
      "if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},
      "then":{"required":["x"]},"else":{"properties":{"x":{"type":"string"}}}})");
  EXPECT_TRUE(accepts(g, R"({"kind":"a","x":1})"));
  EXPECT_FALSE(accepts(g, R"({"kind":"a"})"));  // then: x required
  EXPECT_TRUE(accepts(g, R"({"kind":"b","x":"s"})"));
  EXPECT_FALSE(accepts(g, R"({"kind":"b","x":1})"));  // else: x a string
  EXPECT_TRUE(accepts(g, R"({"x":"s"})"));
  EXPECT_FALSE(accepts(g, R"({"x":1})"));
  auto s = compile(
      R"({"type":"string","if":{"pattern":"^a"},"then":{"maxLength":2},"else":{"minLength":3}})");
  EXPECT_TRUE(accepts(s, R"("ab")"));
  EXPECT_FALSE(accepts(s, R"("abc")"));
  EXPECT_TRUE(accepts(s, R"("bcd")"));
  EXPECT_FALSE(accepts(s, R"("bc")"));
  // then/else without if have no effect.
  auto t = compile(R"({"type":"integer","then":{"minimum":5}})");
  EXPECT_TRUE(accepts(t, "1"));
}

TEST(GrammarJsonSchema, AllOfWithAdditionalProperties) {
  // 'b' is declared only by the second branch; the first, closed, cannot hold it.
  auto g = compile(
      R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false},
      {"properties":{"b":{"type":"string"}}}]})");
  EXPECT_TRUE(accepts(g, R"({"a":1})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"b":"s"})"));
  // With a schema for additional properties, 'b' must satisfy both.
  auto h = compile(
      R"({"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}},
      {"properties":{"b":{"maxLength":2}}}]})");
  EXPECT_TRUE(accepts(h, R"({"a":1,"b":"xy"})"));
  EXPECT_FALSE(accepts(h, R"({"b":"xyz"})"));
  EXPECT_FALSE(accepts(h, R"({"b":1})"));  // the second branch alone would allow it
  EXPECT_FALSE(accepts(h, R"({"c":1})"));
  // Keys no draft defines are annotations: different values do not conflict.
  auto n = compile(R"({"allOf":[{"type":"integer","x-note":"a"},{"minimum":2,"x-note":"b"}]})");
  EXPECT_TRUE(accepts(n, "3"));
  EXPECT_FALSE(accepts(n, "1"));
}

TEST(GrammarJsonSchema, PropertyNames) {
  auto g = compile(R"({"type":"object","properties":{"ok":{},"Bad":{}},
      "propertyNames":{"pattern":"^[a-z]+$","maxLength":3}})");
  EXPECT_TRUE(accepts(g, R"({"ok":1,"abc":2})"));
  EXPECT_FALSE(accepts(g, R"({"Bad":1})"));   // declared, but its name is rejected
  EXPECT_FALSE(accepts(g, R"({"abcd":1})"));  // extra name too long
  EXPECT_FALSE(accepts(g, R"({"x1":1})"));
  auto ref = compile(
      R"({"type":"object","propertyNames":{"$ref":"#/$defs/n"},"$defs":{"n":{"enum":["up","down"]}}})");
  EXPECT_TRUE(accepts(ref, R"({"up":1})"));
  EXPECT_FALSE(accepts(ref, R"({"left":1})"));
  auto none = compile(R"({"type":"object","propertyNames":false})");
  EXPECT_TRUE(accepts(none, "{}"));
  EXPECT_FALSE(accepts(none, R"({"a":1})"));
}

}  // namespace
}  // namespace deepinfer::structured
