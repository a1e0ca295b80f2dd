// Format iri and iri-reference, patternProperties past four patterns, patternProperties against
// another allOf branch's additionalProperties. Every instance's expected verdict is checked against
// our validator first, then the grammar must agree (or, where the lowering is a documented sound
// subset, reject).
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
// The validator agrees with `valid`, and so does the grammar.
void expect(const Compiled& c, const std::string& text, bool valid) {
  testing::expect_verdict(c, text, valid, /*enforce_formats=*/true);
}

TEST(JsonSchemaIriPatternProperties, FormatIri) {
  auto c = compile(R"({"type":"string","format":"iri"})");
  for (const char* ok :
       {R"("https://example.com")", R"("http://example.com:8080/a/b?q=1#frag")",
        R"("urn:isbn:0451450523")", R"("mailto:someone@example.com")",
        R"("http://ƒøø.ßår/?∂éœ=πîx#πîüx")", R"("http://例え.テスト/パス")", R"("tag:")"})
    expect(c, ok, true);
  for (const char* bad : {R"("not-an-iri")", R"("")", R"("/relative/path")", R"("1http://x")",
                          R"("http://exa mple.com")", R"("http://x/a b")", R"("http://x/<>")",
                          R"("http://x/#a#b")", R"("http://x:8o/")", R"("http://x/\u0007")", "1"})
    expect(c, bad, false);
}

TEST(JsonSchemaIriPatternProperties, FormatIriReference) {
  auto c = compile(R"({"type":"string","format":"iri-reference"})");
  for (const char* ok : {R"("https://example.com/π")", R"("/relative/πath")", R"("")", R"("#frag")",
                         R"("a/b?c")", R"("?q=é")"})
    expect(c, ok, true);
  for (const char* bad : {R"("a b")", R"("#a#b")", R"("\\\\x")", R"("%zz")"}) expect(c, bad, false);
}

// A class range that starts inside the two-byte block and ends in a longer one keeps its
// longer characters (its UTF-8 lowering used to stop at the first block's split).
TEST(JsonSchemaIriPatternProperties, ClassRangeAcrossUtf8Lengths) {
  auto c = compile(R"({"type":"string","pattern":"^[\\u{A0}-\\u{D7FF}\\u{10000}-\\u{1FFFD}]+$"})");
  // UTF-8 spelled out: U+00A0, U+00E9, U+4F8B, U+D7FF, U+10000 U+1F600.
  for (const char* ok : {"\"\xc2\xa0\"", "\"\xc3\xa9\"", "\"\xe4\xbe\x8b\"", "\"\xed\x9f\xbf\"",
                         "\"\xf0\x90\x80\x80\xf0\x9f\x98\x80\"", "\"\xc3\x9f\xe4\xbe\x8b\""})
    expect(c, ok, true);
  // a, empty, U+009F, U+E000, U+4F8B a.
  for (const char* bad : {"\"a\"", "\"\"", "\"\xc2\x9f\"", "\"\xee\x80\x80\"",
                          "\"\xe4\xbe\x8b"
                          "a\""})
    expect(c, bad, false);
  auto d = compile(R"({"type":"string","pattern":"^[\\u{7FE}-\\u{801}]$"})");
  // U+07FE U+07FF U+0800 U+0801; then U+07FD U+0802.
  for (const char* ok : {"\"\xdf\xbe\"", "\"\xdf\xbf\"", "\"\xe0\xa0\x80\"", "\"\xe0\xa0\x81\""})
    expect(d, ok, true);
  for (const char* bad : {"\"\xdf\xbd\"", "\"\xe0\xa0\x82\""}) expect(d, bad, false);
}

// Without format enforcement iri is an annotation like every other format.
TEST(JsonSchemaIriPatternProperties, FormatIriNotEnforced) {
  JsonSchemaOptions o;
  o.enforce_formats = false;
  auto g = testing::compile(R"({"type":"string","format":"iri"})", o);
  EXPECT_TRUE(testing::accepts(g, R"("not-an-iri")"));
}

// Ten patterns, one overlapping all the others (a dictionary of hash names): 2^10 signature
// classes would be built before; only the ones some name has are now.
TEST(JsonSchemaIriPatternProperties, ManyOverlappingPatternProperties) {
  auto c = compile(R"({"type":"object","patternProperties":{
      "^[a-zA-Z0-9_-]{1,}$":{"type":"string"},
      "^MD5$":{"type":"string","pattern":"^[a-f0-9]{4}$"},
      "^SHA-1$":{"type":"string","pattern":"^[a-f0-9]{5}$"},
      "^SHA-256$":{"type":"string","pattern":"^[a-f0-9]{6}$"},
      "^x":{"minLength":2},
      "^y":{"maxLength":2},
      "^z":{"type":"string","enum":["a","b"]},
      "q$":{"type":"string","pattern":"^q"},
      "^w":{"type":"string","minLength":3},
      "^v":{"type":"string","maxLength":3}},
    "additionalProperties":{"type":"integer"}})");
  for (const char* ok :
       {R"({})", R"({"MD5":"abcd","SHA-1":"abcde","SHA-256":"abcdef"})", R"({"other":"x"})",
        R"({"x1":"ab","y1":"ab","z":"a","qq":"q1","w":"abc","v":""})", R"({"a b":3})",
        R"({"MD5":"abcd","#":7})", R"({"x q":"qx"})"})
    expect(c, ok, true);
  for (const char* bad :
       {R"({"MD5":"abc"})", R"({"SHA-1":"abcdef"})", R"({"other":1})", R"({"a b":"x"})",
        R"({"x1":"a"})", R"({"y1":"abc"})", R"({"z":"c"})", R"({"qq":"1q"})", R"({"x q":"x"})",
        R"({"w":"ab"})", R"({"v":"abcd"})", R"({"#":"s"})"})
    expect(c, bad, false);
}

// Disjoint patterns: k + 1 classes, however many patterns.
TEST(JsonSchemaIriPatternProperties, ManyDisjointPatternProperties) {
  std::string pp;
  for (char ch = 'a'; ch <= 'p'; ++ch)
    pp += fmt::format(R"({}"^{}[0-9]+$":{{"const":{}}})", pp.empty() ? "" : ",", ch, ch - 'a');
  auto c = compile(R"({"type":"object","patternProperties":{)" + pp +
                   R"(},"additionalProperties":false})");
  for (const char* ok : {R"({})", R"({"a1":0,"b22":1,"p9":15})", R"({"c0":2,"c1":2})"})
    expect(c, ok, true);
  for (const char* bad : {R"({"a1":1})", R"({"q1":16})", R"({"a":0})", R"({"p1":14})"})
    expect(c, bad, false);
}

// Patterns every name combination can match: 2^k classes, refused past the cap instead of
// building them all.
TEST(JsonSchemaIriPatternProperties, TooManyNameClassesAreRefused) {
  std::string pp;
  for (char ch = 'a'; ch <= 'h'; ++ch)
    pp += fmt::format(R"({}"{}":{{"type":"integer"}})", pp.empty() ? "" : ",", ch);
  testing::expect_refused(R"({"type":"object","patternProperties":{)" + pp + "}}",
                          "patternProperties");
}

// One branch's patternProperties next to another branch's additionalProperties: the latter
// becomes a pattern property over the names it governs, so each branch keeps its meaning.
TEST(JsonSchemaIriPatternProperties, PatternPropertiesAcrossAllOf) {
  auto c = compile(R"({"type":"object","allOf":[
      {"patternProperties":{"^.{1,3}$":false},"additionalProperties":true},
      {"patternProperties":{"a":true},"additionalProperties":false},
      {"patternProperties":{"b":true},"additionalProperties":false}]})");
  for (const char* ok : {R"({})", R"({"abcd":1})", R"({"xxab":1,"bbaa":[]})"}) expect(c, ok, true);
  for (const char* bad :
       {R"({"ab":1})", R"({"aaaa":1})", R"({"bbbb":1})", R"({"xxxx":1})", R"({"abcd":1,"cdef":2})"})
    expect(c, bad, false);

  // Declared names keep the additionalProperties of the branches that do not declare them.
  auto d = compile(R"({"type":"object","allOf":[
      {"properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"string"}},
      {"patternProperties":{"^x-":{"maxLength":3}},"additionalProperties":{"minLength":1}}]})");
  for (const char* ok : {R"({"id":1})", R"({"x-a":"abc","name":"n"})", R"({"x-":""})"})
    expect(d, ok, true);
  for (const char* bad : {R"({"id":"1"})", R"({"x-a":"abcd"})", R"({"name":""})", R"({"x-a":1})",
                          R"({"id":1,"k":2})"})
    expect(d, bad, false);

  // Names that need escaping in the rewritten pattern.
  auto e = compile(R"({"type":"object","allOf":[
      {"properties":{"a.b":{},"(x)|y":{},"é":{}},"additionalProperties":false},
      {"patternProperties":{"^[a-z.]+$":{"type":"integer"}}}]})");
  for (const char* ok : {R"({"a.b":1})", R"({"(x)|y":"s","é":null})"}) expect(e, ok, true);
  for (const char* bad : {R"({"a.b":"s"})", R"({"axb":1})", R"({"y":1})", R"({"e":1})"})
    expect(e, bad, false);
}

// oneOf over arrays whose item schemas cannot agree: [] matches both branches (invalid), any
// non-empty array matches exactly one.
TEST(JsonSchemaIriPatternProperties, OneOfArraysWithDisjointItems) {
  // Items through $ref to a oneOf (refused before round 6).
  auto c = compile(R"({"definitions":{"nn":{"oneOf":[{"type":"number"},{"type":"null"}]},
        "nums":{"type":"array","items":{"$ref":"#/definitions/nn"}}},
      "oneOf":[{"$ref":"#/definitions/nums"},
               {"type":"array","items":{"$ref":"#/definitions/nums"}}]})");
  for (const char* ok : {"[1]", "[1, null, 2.5]", "[[]]", "[[1], [null, 3]]"}) expect(c, ok, true);
  for (const char* bad : {"[]", "[1, [2]]", "[[1], 2]", "[\"a\"]", "{}", "1", "[[\"a\"]]"})
    expect(c, bad, false);

  // Six branches of item enums (refused before round 6).
  auto d = compile(R"({"type":"array","maxItems":2,"oneOf":[
      {"items":{"enum":["a","b"]}},{"items":{"enum":["c","d"]}},{"items":{"enum":["e"]}},
      {"items":{"enum":["f"]}},{"items":{"enum":["g"]}},{"items":{"enum":["h",1]}}]})");
  for (const char* ok : {R"(["a"])", R"(["b","a"])", R"(["c","d"])", R"(["e","e"])", "[1, \"h\"]"})
    expect(d, ok, true);
  for (const char* bad : {"[]", R"(["a","c"])", R"(["a","b","a"])", R"(["x"])", "[1, 2, 1]"})
    expect(d, bad, false);
}

// Item schemas that may share a value: not this construction (another lowering takes it);
// an array of shared values still matches both branches and stays out.
TEST(JsonSchemaIriPatternProperties, OneOfArraysWithOverlappingItems) {
  auto c = compile(R"({"oneOf":[{"type":"array","items":{"enum":["a","b"]}},
      {"type":"array","items":{"enum":["b","c"]}}]})");
  for (const char* ok : {R"(["a"])", R"(["a","b"])", R"(["c","b"])"}) expect(c, ok, true);
  for (const char* bad : {"[]", R"(["b"])", R"(["b","b"])", R"(["a","c"])"}) expect(c, bad, false);
}

// A oneOf branch that is a union of $refs: the disjointness test sees the referenced types
// (strings and null against arrays), so the branches are a plain union (refused before).
TEST(JsonSchemaIriPatternProperties, OneOfSeesTypesThroughRefsInUnions) {
  auto c = compile(R"({"definitions":{
        "rel":{"type":"string","pattern":"^[a-z][^/]*(/[^/]+)*$"},
        "abs":{"type":"string","pattern":"^/(([^/]+/)*[^/]+)?$"},
        "none":{"type":"null"},
        "single":{"oneOf":[{"$ref":"#/definitions/rel"},{"$ref":"#/definitions/abs"},
                           {"$ref":"#/definitions/none"}]},
        "combined":{"type":"array","minItems":2,"items":{"$ref":"#/definitions/single"}}},
      "type":"object","additionalProperties":{"oneOf":[{"$ref":"#/definitions/single"},
                                                     {"$ref":"#/definitions/combined"}]}})");
  for (const char* ok : {R"({"a":"x/y"})", R"({"a":"/x"})", R"({"a":null})", R"({"a":["x","/y"]})",
                         R"({"a":[null,null,"q"]})"})
    expect(c, ok, true);
  for (const char* bad : {R"({"a":"X"})", R"({"a":["x"]})", R"({"a":1})", R"({"a":["x",1]})",
                          R"({"a":[]})", R"({"a":{}})"})
    expect(c, bad, false);
}

// allOf of decimal multipleOf values: the multiples of their least common multiple
// (6.75 = 27/4 and 19: 513; 0.5 and 0.2: 1), refused as conflicting before.
TEST(JsonSchemaIriPatternProperties, MultipleOfDecimalsMerge) {
  auto c = compile(R"({"type":"integer","allOf":[{"multipleOf":6.75},{"multipleOf":19}]})");
  for (const char* ok : {"0", "513", "1026", "-513", "5130"}) expect(c, ok, true);
  for (const char* bad : {"19", "27", "256", "100", "514", "1.5"}) expect(c, bad, false);
  // 1/2 and 1/5: the integers.
  auto d = compile(R"({"type":"number","allOf":[{"multipleOf":0.5},{"multipleOf":0.2}]})");
  for (const char* ok : {"0", "3", "-6", "10"}) expect(d, ok, true);
  for (const char* bad : {"0.5", "0.2", "1.5", "0.4", "\"3\""}) expect(d, bad, false);
  // 0.5 and 0.75: multiples of 1.5, a step a double holds exactly: its integer multiples, the
  // multiples of 3 (issue 31; non-integers such as 1.5 are left out, a sound subset).
  auto e = compile(R"({"type":"number","allOf":[{"multipleOf":0.5},{"multipleOf":0.75}]})");
  for (const char* ok : {"0", "3", "-6", "9"}) expect(e, ok, true);
  for (const char* bad : {"1", "2", "0.75", "\"3\""}) expect(e, bad, false);
  EXPECT_FALSE(testing::accepts(e.g, "1.5"));
  // 0.1 and 0.3: 0.3, which no double holds exactly; refused by name.
  testing::expect_refused(R"({"type":"number","allOf":[{"multipleOf":0.1},{"multipleOf":0.3}]})",
                          "multipleOf");
}

}  // namespace
}  // namespace deepinfer::structured
