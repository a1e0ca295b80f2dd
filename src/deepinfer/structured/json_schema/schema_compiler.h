// Internal: SchemaCompiler, the JSON Schema lowering state shared by the files of this folder.
// schema_compiler.cc walks the document (structure, combinators, $ref); the other files lower
// one type or keyword each (README.md of the module maps keywords to files). Not public API.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "deepinfer/structured/automata/char_class.h"
#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/structured/json_schema/merge.h"
#include "deepinfer/structured/json_schema/parts.h"
#include "deepinfer/structured/json_schema/validate.h"
#include "deepinfer/structured/automata/regex_compiler.h"

namespace deepinfer::structured::detail {

using Json = nlohmann::ordered_json;

inline constexpr int64_t kMaxObjectExpand = 1000;
inline constexpr int64_t kMaxLengthExpand = 5000;  // maxLength / maxItems cap (sound: fewer)
inline constexpr int64_t kIntClamp = 9'000'000'000'000'000'000LL;

inline int64_t clamp_i64(double v) {
  if (v > static_cast<double>(kIntClamp)) return kIntClamp;
  if (v < -static_cast<double>(kIntClamp)) return -kIntClamp;
  return static_cast<int64_t>(v);
}

// A non-negative count keyword (minLength, maxItems, ...), clamped.
inline std::optional<int64_t> get_count(const Json& s, const char* k) {
  if (!s.contains(k) || !s[k].is_number()) return std::nullopt;
  double v = s[k].get<double>();
  return v < 0 ? 0 : clamp_i64(v);
}
// min/maxProperties counted along a layout of declared properties (one rule per count).
inline constexpr int64_t kMaxCountedProperties = 64;

// strings.cc: the strings matching the pattern (search semantics) and the format (whole
// string) with between lo and hi code points (hi < 0: unbounded), as one automaton.
Result<CodePointDfa> string_automaton(const std::optional<std::string>& pattern,
                                      const std::optional<std::string>& format, int64_t lo, int64_t hi,
                                      PatternDfaMemo* patterns);
// Whether the 2020-12 spec defines this format name (others are annotations).
bool spec_defined_format(const std::string& f);

// Validation keywords we do not implement: refused rather than silently dropped.
inline const std::set<std::string> kRefused = {
    "minContains", "maxContains", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$recursiveRef"};

struct ObjectLayout;  // objects.cc

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& o, const GrammarLimits& l);

  Result<Grammar> run();
  // Whether a oneOf, not, if or else appears anywhere in the document (an explicit stack).
  static bool has_approximated_keyword(const Json& root);
  Result<Grammar> run_any() {
    uint32_t top = b_.rule_with_alts("root", {cat({ws_, {any_value()}, ws_})});
    return b_.build(top);
  }

 private:
  static Sequence cat(std::initializer_list<Sequence> parts) {
    Sequence s;
    for (const auto& p : parts) s.insert(s.end(), p.begin(), p.end());
    return s;
  }
  Sequence lit(const std::string& t) { return b_.literal(t); }
  Element rule(const std::string& name, std::vector<Sequence> alts) {
    return GrammarBuilder::call(b_.rule_with_alts(name, std::move(alts)));
  }
  Element never() { return rule("never", {}); }
  // A merger / validator for this compile: $ref resolves against root_, patterns_ is shared.
  SchemaMerger new_merger() {
    return SchemaMerger([this](const std::string& r, const std::string& p) { return resolve(r, p); },
                        &patterns_);
  }
  InstanceValidator new_validator() { return InstanceValidator(root_, o_.enforce_formats, &patterns_); }

  Element any_string();

  Element any_value();

  // Literal JSON text for a const/enum value (compact, schema key order).
  Element literal_value(const Json& v) { return rule("const", {lit(v.dump())}); }

  Result<const Json*> resolve(const std::string& ref, const std::string& ptr);

  // The one subschema named `name` by `$anchor` or by a fragment `$id`/`id` ("#name", drafts
  // 4-7); nullptr when there is none, more than one, or some `$id` below the root changes the
  // base URI (then "#name" would depend on where the $ref sits). Instance values (enum, const,
  // default, examples) are not searched.
  const Json* find_anchor(const std::string& name);

  Result<Element> gen_ref(const std::string& ref, const std::string& ptr);

  Result<Element> gen(const Json& s, const std::string& ptr);

  Result<Element> gen_inner(const Json& s, const std::string& ptr);

  // if/then/else == (if and then) or (not if and else); then/else without if do nothing.
  Result<Element> gen_if(const Json& s, const std::string& ptr);

  // The enum/const values that validate against all of `s`; nullopt when a verdict is unknown.
  std::optional<Element> enum_by_validation(const Json& s);

  // `not` in the decidable cases: not true/{} (nothing matches), not false (no constraint),
  // not {type: ...} (those types are removed). Returns the schema without `not`, or nullopt.
  static std::optional<Json> drop_simple_not(const Json& s);
  static size_t annotation_count(const Json& s);

  static bool has_validation_siblings(const Json& s);

  Result<Element> gen_union(const Json& s, const std::string& ptr);

  // Branch i of a oneOf and none of `others` as `allOf [branch, not anyOf others]`; nullopt
  // when gen_not cannot write that (the builder's memo tables are restored, so rules of the
  // failed attempt are left unreachable instead of half-built and shared).
  Result<std::optional<Element>> one_of_by_not(const std::vector<Json>& merged, size_t i,
                                               const std::vector<size_t>& others,
                                               const std::string& ptr);

  Result<Element> gen_typed(const Json& s, const std::string& ptr);
  Result<Element> gen_string(const Json& s, const std::string& ptr);
  // `excluded`: integer values left out (integer mode only; `not` with an enum).
  Result<Element> gen_number(const Json& s, const std::string& ptr, bool integer,
                             const std::set<int64_t>* excluded = nullptr);
  // not.cc: `not` beyond the cases drop_simple_not removes, type by type.
  Result<Element> gen_not(const Json& s, const std::string& ptr);
  // not.cc: the stages of gen_not (type by type; each false = this form is refused).
  Result<Element> not_complement(const Json& s, const std::string& ptr);
  Status not_split(SchemaMerger& merger, const Json& x, const std::string& p, std::vector<Json>& ns);
  Result<bool> not_literals(const std::string& t, const Json& rt, const std::vector<Json>& live,
                            InstanceValidator& validator, std::vector<Sequence>& alts);
  Result<bool> not_strings(const Json& rt, const std::vector<Json>& live, std::vector<Sequence>& alts);
  Result<bool> not_objects(const Json& rt, const std::vector<Json>& live, const std::string& ptr,
                           std::vector<Sequence>& alts);
  Result<bool> not_by_reasons(const std::string& t, const Json& rt, const std::vector<Json>& live,
                              const std::string& ptr, std::vector<Sequence>& alts);
  // Multiples of k; without negatives when !negative, without 0 when !zero.
  Element integer_multiple_of(int k, bool negative = true, bool zero = true);
  // multipleOf m between two bounds, when there are at most 1000 such values: the values
  // themselves in their shortest decimal spelling; nullopt otherwise.
  std::optional<Element> enumerated_multiples(const Json& s, double m, bool integer);
  // residues.cc: numbers whose only constraints are integer multipleOf under
  // not/allOf/anyOf/oneOf/$ref, as a remainder automaton; nullopt when s is not of that kind.
  // With bounds too (then only below a magnitude cap): the values below a power of ten above
  // the bounds are spelled out and minimized away. `plain`: also without a combinator.
  Result<std::optional<Element>> residue_number(const Json& s, const std::string& ptr,
                                                bool plain = false);
  Result<std::optional<Element>> bounded_residues(const Json& s, const std::vector<double>& bounds,
                                                  int64_t modulus, const std::string& ptr);
  Result<Element> gen_array(const Json& s, const std::string& ptr);
  // `contains` (arrays.cc): items with one of them also matching `contains`.
  Result<Element> contains_array(const Json& s, const Json& items, int64_t min, int64_t max,
                                 const std::string& ptr);
  // Several `contains` at once (a list, as the allOf merge writes them).
  Result<Element> contains_all(const Json& list, const Json& items, int64_t min, int64_t max,
                               const std::string& ptr);
  // uniqueItems over a small finite item domain: one rule per set of values already written.
  Result<std::optional<Element>> unique_array(const Json& items, int64_t min, int64_t max);
  Result<Element> gen_object(const Json& s, const std::string& ptr);
  // objects.cc: the stages of gen_object over one ObjectLayout.
  Result<Element> object_member(const Sequence& key, const Json& schema, const std::string& ptr);
  Status object_members(const Json& s, const std::string& ptr, ObjectLayout& layout);
  Result<bool> object_property_names(const Json& s, const std::string& ptr, ObjectLayout& layout);
  Status object_extra(const std::string& ptr, ObjectLayout& layout);
  Result<bool> object_counts(const Json& s, const std::string& ptr, ObjectLayout& layout);
  std::optional<Sequence> object_extras(ObjectLayout& layout, int f, int64_t lo, int64_t hi);
  Result<Element> object_tracked(const std::string& ptr, ObjectLayout& layout);
  Result<Element> object_any_order(ObjectLayout& layout);
  // pattern_members.cc: patternProperties.
  Result<std::optional<Json>> pattern_conjunction(const Json& pp, const std::string& name,
                                                  const Json* declared, const Json* addl);
  // one_of.cc: objects matching branch i and none of `others` (which may overlap
  // it), as plain object schemas; nullopt when the branches are not all object schemas.
  // The strings matching branch i and none of `others`, or nullopt when a branch's string
  // language cannot be written as an automaton.
  Result<std::optional<CodePointDfa>> string_language(const Json& m);
  Result<std::optional<Element>> one_of_strings(const std::vector<Json>& merged, size_t i,
                                                const std::vector<size_t>& others);
  Result<std::optional<std::vector<Json>>> one_of_cases(const std::vector<Json>& merged, size_t i,
                                                        const std::vector<size_t>& others);
  // Non-empty arrays of branch i when every overlapping branch constrains all its items by a
  // schema disjoint from branch i's `items` (so any item of ours fails it); nullopt otherwise.
  std::optional<Json> one_of_arrays(const std::vector<Json>& merged, size_t i,
                                    const std::vector<size_t>& others);
  // dependencies.cc: dependentRequired / dependencies, as names each present
  // property requires; nullopt entry = the property may not appear at all.
  // Schema-valued dependencies beyond required names, as a union of cases over which
  // trigger names are present; nullopt when there are none.
  Result<std::optional<Element>> dependent_schema_cases(const Json& s, const std::string& ptr);
  Result<std::map<std::string, std::optional<std::vector<std::string>>>> dependencies(
      const Json& s, const std::string& ptr);
  // `name_filter`: extra names must also be in this language (propertyNames), or nullptr.
  Result<std::optional<Element>> pattern_members(const Json& pp, const Json* addl,
                                                 const std::vector<std::string>& names,
                                                 const std::string& ptr,
                                                 const CodePointDfa* name_filter = nullptr);

  const Json& root_;
  JsonSchemaOptions o_;
  GrammarBuilder b_;
  Sequence ws_;
  std::optional<Element> any_value_, any_string_;
  std::map<std::string, uint32_t> ref_rules_;
  std::map<std::string, uint32_t> merged_rules_;  // schema text of $ref-with-siblings / allOf
  int depth_ = 0;
  // The pattern automata this compile has built: a patternProperties key is matched at every
  // name it governs. Handed to every dfa_from_pattern call, merger and validator of it.
  PatternDfaMemo patterns_;
};

}  // namespace deepinfer::structured::detail
