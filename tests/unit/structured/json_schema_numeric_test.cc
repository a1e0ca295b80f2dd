// NumericPredicate (json_schema/numeric.h) against the InstanceValidator: random purely
// numeric schemas over a range of integers, values at and next to the bounds, decimal and
// integer multipleOf, negative ranges and `not`; then the multipleOf automata built on it
// (json_schema/residues.cc) walked as grammars over the same integers.
#include "deepinfer/structured/json_schema/numeric.h"

#include <gtest/gtest.h>

#include <random>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"
#include "grammar_test_util.h"

namespace deepinfer::structured {
namespace {

using Json = nlohmann::ordered_json;

// The integers each schema is checked on: a window around zero and the bounds used below,
// and a few far values (decided by the remainders alone).
std::vector<int64_t> probe_values() {
  std::vector<int64_t> out;
  for (int64_t v = -260; v <= 260; ++v) out.push_back(v);
  for (int64_t v : {999, 1000, 1001, 4620, 99'990, 1'000'000, 1'000'011, 123'456'789})
    for (int64_t w : {v, -v}) out.push_back(w);
  return out;
}

// Every probe value gets the validator's verdict (which must be decisive there).
void expect_agrees(const Json& root, const Json& schema) {
  auto p = NumericPredicate::compile(root, schema);
  ASSERT_TRUE(p.has_value()) << schema.dump();
  InstanceValidator validator(root, false);
  for (int64_t v : probe_values()) {
    Verdict want = validator.validate(schema, Json(v));
    ASSERT_NE(want, Verdict::kUnknown) << schema.dump() << " at " << v;
    ASSERT_EQ(p->accepts(v), want == Verdict::kValid) << schema.dump() << " at " << v;
  }
}

TEST(NumericPredicate, BoundsAtAndNearTheirValues) {
  for (const char* src : {
           R"({"type":"integer","minimum":-17,"maximum":40})",
           R"({"type":"number","exclusiveMinimum":-17,"exclusiveMaximum":40})",
           R"({"minimum":-17.5,"maximum":39.5})",
           R"({"exclusiveMinimum":-17.5,"exclusiveMaximum":39.5})",
           R"({"minimum":-17,"exclusiveMinimum":true,"maximum":40,"exclusiveMaximum":true})",
           R"({"minimum":-17,"exclusiveMinimum":false,"maximum":40,"exclusiveMaximum":false})",
           R"({"maximum":-100,"minimum":-200})",
           R"({"minimum":5,"maximum":4})",
       })
    expect_agrees(Json::parse(src), Json::parse(src));
}

TEST(NumericPredicate, MultipleOfIntegersAndDecimals) {
  for (const char* src : {
           R"({"multipleOf":7})",
           R"({"multipleOf":7.0})",
           R"({"multipleOf":0.5})",
           R"({"multipleOf":0.01})",
           R"({"multipleOf":2.5})",
           R"({"multipleOf":1.5})",
           R"({"multipleOf":0.3})",
           R"({"multipleOf":0.75})",
           R"({"multipleOf":12.25})",
           R"({"type":"integer","multipleOf":1})",
           R"({"multipleOf":11,"minimum":-100,"exclusiveMaximum":121})",
           R"({"type":"number","not":{"multipleOf":2.5,"maximum":-20}})",
       })
    expect_agrees(Json::parse(src), Json::parse(src));
}

TEST(NumericPredicate, CombinatorsConstEnumTypeAndRefs) {
  Json root = Json::parse(R"({
    "type": "number",
    "allOf": [{"$ref": "#/$defs/a"}, {"not": {"multipleOf": 8}}],
    "$defs": {
      "a": {"oneOf": [{"multipleOf": 3}, {"multipleOf": 4}, {"$ref": "#/$defs/b"}]},
      "b": {"anyOf": [{"const": 5}, {"enum": [7, "7", 11.0, null, 2.5]}]}
    }})");
  expect_agrees(root, root);
  for (const char* src : {
           R"({"type":"string"})",
           R"({"type":["string","integer"]})",
           R"({"type":["null"],"not":{"minimum":3}})",
           R"({"not":{"not":{"minimum":3,"multipleOf":2}}})",
           R"({"if":{"minimum":0},"then":{"multipleOf":3},"else":{"multipleOf":5}})",
           R"({"if":{"minimum":0},"then":{"multipleOf":3}})",
           R"({"then":{"multipleOf":3}})",
           R"({"allOf":[true,{"anyOf":[false,{"maximum":0}]}],"title":"t"})",
           R"({"oneOf":[{"multipleOf":2},{"multipleOf":3},{"maximum":-50}]})",
       })
    expect_agrees(Json::parse(src), Json::parse(src));
}

TEST(NumericPredicate, RefusesWhatItDoesNotDecide) {
  for (const char* src : {
           R"({"pattern":"a"})",
           R"({"minLength":1})",
           R"({"multipleOf":1e-12})",
           R"({"multipleOf":0.1000000001})",  // ten decimals: not 1e8 / 1e9 (every integer)
           R"({"multipleOf":0})",
           R"({"multipleOf":-3})",
           R"({"$ref":"other.json#/a"})",
           R"({"$ref":"#/missing"})",
           R"({"not":{"properties":{}}})",
           R"({"type":7})",
           R"({"minimum":"3"})",
       }) {
    Json s = Json::parse(src);
    EXPECT_FALSE(NumericPredicate::compile(s, s).has_value()) << src;
  }
  Json cycle = Json::parse(R"({"$defs":{"a":{"not":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"})");
  EXPECT_FALSE(NumericPredicate::compile(cycle, cycle).has_value());
}

// A random purely numeric schema of bounded depth, its bounds and divisors drawn so that
// the probe window crosses them.
Json random_schema(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const std::vector<Json> kBounds = {-200, -17, -3.5, 0, 1, 10, 10.5, 99, 150};
  static const std::vector<Json> kDivisors = {2, 3, 5, 7, 11, 0.5, 0.25, 2.5, 1.5, 0.01, 4.0};
  Json s = Json::object();
  int keywords = 1 + pick(3);
  for (int i = 0; i < keywords; ++i) {
    switch (pick(depth > 0 ? 10 : 6)) {
      case 0:
        s["type"] = pick(3) == 0 ? Json("string") : pick(2) ? Json("integer") : Json("number");
        break;
      case 1:
        s[pick(2) ? "minimum" : "exclusiveMinimum"] = kBounds[pick(kBounds.size())];
        break;
      case 2:
        s[pick(2) ? "maximum" : "exclusiveMaximum"] = kBounds[pick(kBounds.size())];
        break;
      case 3:
        s["multipleOf"] = kDivisors[pick(kDivisors.size())];
        break;
      case 4:
        s["enum"] = Json::array({kBounds[pick(kBounds.size())], pick(60) - 30, "x"});
        break;
      case 5:
        s["const"] = pick(40) - 20;
        break;
      case 6:
        s["not"] = random_schema(rng, depth - 1);
        break;
      case 7:
      case 8:
      case 9: {
        const char* kw = pick(3) == 0 ? "allOf" : pick(2) ? "anyOf" : "oneOf";
        Json branches = Json::array();
        for (int b = 1 + pick(3); b > 0; --b) branches.push_back(random_schema(rng, depth - 1));
        s[kw] = branches;
        break;
      }
    }
  }
  return s;
}

TEST(NumericPredicate, RandomSchemasAgreeWithTheValidator) {
  std::mt19937 rng(20261129);
  for (int i = 0; i < 300; ++i) {
    Json s = random_schema(rng, 3);
    expect_agrees(s, s);
  }
}

// residue_bits agrees with accepts on every remainder where it answers (periodic schemas),
// and answers for schemas with integer divisors of the modulus only.
TEST(NumericPredicate, ResidueBitsAgreeWithAccepts) {
  std::mt19937 rng(4620);
  int answered = 0;
  for (int i = 0; i < 600; ++i) {
    Json s = random_schema(rng, 3);
    auto p = NumericPredicate::compile(s, s);
    ASSERT_TRUE(p.has_value()) << s.dump();
    const int64_t modulus = 2 * 3 * 5 * 7 * 11 * 4;
    auto bits = p->residue_bits(modulus);
    if (!bits) continue;
    ++answered;
    for (int64_t r = 0; r < modulus; ++r)
      ASSERT_EQ(((*bits)[r / 64] >> (r % 64)) & 1, p->accepts(r) ? 1u : 0u)
          << s.dump() << " at " << r;
  }
  EXPECT_GT(answered, 30);
  Json bounded = Json::parse(R"({"not":{"multipleOf":3,"minimum":0}})");
  EXPECT_FALSE(NumericPredicate::compile(bounded, bounded)->residue_bits(3).has_value());
  Json listed = Json::parse(R"({"anyOf":[{"multipleOf":3},{"const":4}]})");
  EXPECT_FALSE(NumericPredicate::compile(listed, listed)->residue_bits(3).has_value());
  Json coarse = Json::parse(R"({"multipleOf":7})");
  EXPECT_FALSE(NumericPredicate::compile(coarse, coarse)->residue_bits(10).has_value());
}

// Through the grammar: each integer is accepted exactly when the validator says valid (the
// automata are exact on integers).
void expect_grammar_exact(const std::string& src, int64_t lo, int64_t hi) {
  auto g = testing::compile(src);
  ASSERT_NE(g, nullptr) << src;
  Json s = Json::parse(src);
  InstanceValidator validator(s, false);
  for (int64_t v = lo; v <= hi; ++v) {
    Verdict want = validator.validate(s, Json(v));
    ASSERT_NE(want, Verdict::kUnknown) << src << " at " << v;
    ASSERT_EQ(testing::accepts(g, std::to_string(v)), want == Verdict::kValid)
        << src << " at " << v;
  }
}

TEST(NumericPredicate, ResidueAutomataMatchTheValidatorOnIntegers) {
  expect_grammar_exact(R"({"type":"integer","not":{"multipleOf":3,"minimum":10}})", -40, 40);
  expect_grammar_exact(R"({"type":"integer","minimum":-25,"exclusiveMaximum":31,
      "not":{"multipleOf":4}})",
                       -40, 40);
  expect_grammar_exact(R"({"type":"number","allOf":[{"multipleOf":11,"minimum":100},
      {"not":{"multipleOf":2}}]})",
                       0, 260);
  expect_grammar_exact(R"({"type":"integer","oneOf":[{"multipleOf":6},{"multipleOf":10},
      {"not":{"multipleOf":7}}]})",
                       -70, 70);
}

}  // namespace
}  // namespace deepinfer::structured
