// Internal: the JSON Schema lowering state shared by json_schema_compiler.cc (structure,
// combinators, $ref) and json_schema_types.cc (per-type rules). Not part of the public API.
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

// json_schema_types.cc: the strings matching the pattern (search semantics) and the format
// (whole string) with between lo and hi code points (hi < 0: unbounded), as one automaton.
Result<CodePointDfa> string_automaton(const std::optional<std::string>& pattern,
                                      const std::optional<std::string>& format, int64_t lo, int64_t hi);
// Whether the 2020-12 spec defines this format name (others are annotations).
bool spec_defined_format(const std::string& f);

// Validation keywords we do not implement: refused rather than silently dropped.
inline const std::set<std::string> kRefused = {
    "minContains", "maxContains", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$recursiveRef"};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& o, const GrammarLimits& l)
      : root_(root), o_(o), b_(l) {
    ByteSet w;
    for (char c : std::string(" \t\n\r")) w.set(static_cast<uint8_t>(c));
    if (o_.any_whitespace) ws_ = Sequence{b_.star({b_.bytes(w)}, "ws")};
  }

  Result<Grammar> run() {
    DI_ASSIGN_OR_RETURN(Element e, gen(root_, ""));
    uint32_t top = b_.rule_with_alts("root", {cat({ws_, {e}, ws_})});
    static constexpr const char* kNothing =
        "json schema: no JSON value satisfies it (false, a $ref that only leads back to itself, "
        "contradictory keywords, or a required property whose schema nothing satisfies)";
    Result<Grammar> g = b_.build(top, kNothing);
    if (g.is_ok() || g.status().message() != kNothing || !has_approximated_keyword(root_)) return g;
    // oneOf, not and if/else are written as sound subsets (docs/structured_outputs.md): the
    // empty grammar may be ours, not the schema's, so say so instead of calling it unsatisfiable.
    return unsupported(
        "json schema: no JSON value satisfies it as this engine writes it: its oneOf/not/if "
        "are lowered to sound subsets that may leave out every instance (or nothing satisfies "
        "it at all)");
  }
  // Whether a oneOf, not, if or else appears anywhere in the document (an explicit stack).
  static bool has_approximated_keyword(const Json& root) {
    std::vector<const Json*> stack = {&root};
    while (!stack.empty()) {
      const Json* v = stack.back();
      stack.pop_back();
      if (v->is_object())
        for (const auto& [k, x] : v->items()) {
          if (k == "oneOf" || k == "not" || k == "if" || k == "else") return true;
          if (x.is_structured()) stack.push_back(&x);
        }
      else if (v->is_array())
        for (const auto& x : *v)
          if (x.is_structured()) stack.push_back(&x);
    }
    return false;
  }
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

  Element any_string() {
    if (!any_string_) {
      any_string_ = rule("string", {cat({lit("\""), {b_.star({json_string_char(b_)}, "chars")}, lit("\"")})});
    }
    return *any_string_;
  }

  Element any_value() {
    if (any_value_) return *any_value_;
    uint32_t v = b_.new_rule("value");
    any_value_ = GrammarBuilder::call(v);
    Sequence sep = cat({ws_, lit(","), ws_});
    Element member = rule("member", {cat({{any_string()}, ws_, lit(":"), ws_, {*any_value_}})});
    Element members = b_.star(cat({sep, {member}}), "members");
    Element obj = rule("object", {cat({lit("{"), ws_, {member, members}, ws_, lit("}")}),
                                  cat({lit("{"), ws_, lit("}")})});
    Element items = b_.star(cat({sep, {*any_value_}}), "items");
    Element arr = rule("array", {cat({lit("["), ws_, {*any_value_, items}, ws_, lit("]")}),
                                 cat({lit("["), ws_, lit("]")})});
    for (Sequence alt : {Sequence{obj}, Sequence{arr}, Sequence{any_string()},
                         Sequence{any_number(b_)}, lit("true"), lit("false"), lit("null")})
      b_.add_alt(v, std::move(alt));
    return *any_value_;
  }

  // Literal JSON text for a const/enum value (compact, schema key order).
  Element literal_value(const Json& v) { return rule("const", {lit(v.dump())}); }

  Result<const Json*> resolve(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#')
      return unsupported("json schema: non-local $ref '{}' at {}", ref, ptr);
    std::string frag = ref.substr(1);
    std::string decoded;
    for (size_t i = 0; i < frag.size(); ++i) {
      if (frag[i] == '%' && i + 2 < frag.size()) {
        decoded += static_cast<char>(std::stoi(frag.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += frag[i];
      }
    }
    if (!decoded.empty() && decoded[0] != '/') {
      if (const Json* t = find_anchor(decoded)) return t;
      return unsupported("json schema: $ref to anchor '{}' at {}", ref, ptr);
    }
    try {
      const Json& t = root_.at(Json::json_pointer(decoded));
      return &t;
    } catch (const std::exception&) {
      return invalid_argument("json schema: $ref '{}' at {} does not resolve", ref, ptr);
    }
  }

  // The one subschema named `name` by `$anchor` or by a fragment `$id`/`id` ("#name", drafts
  // 4-7); nullptr when there is none, more than one, or some `$id` below the root changes the
  // base URI (then "#name" would depend on where the $ref sits). Instance values (enum, const,
  // default, examples) are not searched.
  const Json* find_anchor(const std::string& name) {
    const Json* found = nullptr;
    int matches = 0;
    bool rebased = false;
    std::function<void(const Json&, bool)> walk = [&](const Json& x, bool top) {
      if (x.is_array()) {
        for (const auto& y : x) walk(y, false);
        return;
      }
      if (!x.is_object()) return;
      bool named = false;
      for (const auto& [k, v] : x.items()) {
        if (!v.is_string()) continue;
        const std::string& t = v.get_ref<const std::string&>();
        if (k == "$anchor" && t == name) named = true;
        if ((k == "$id" || k == "id") && !t.empty() && t[0] == '#' && t.substr(1) == name)
          named = true;
        if ((k == "$id" || k == "id") && (t.empty() || t[0] != '#') && !top) rebased = true;
      }
      if (named) {
        found = &x;
        ++matches;
      }
      for (const auto& [k, v] : x.items())
        if (k != "enum" && k != "const" && k != "default" && k != "examples") walk(v, false);
    };
    walk(root_, true);
    return matches == 1 && !rebased ? found : nullptr;
  }

  Result<Element> gen_ref(const std::string& ref, const std::string& ptr) {
    auto it = ref_rules_.find(ref);
    if (it != ref_rules_.end()) return GrammarBuilder::call(it->second);
    DI_ASSIGN_OR_RETURN(const Json* target, resolve(ref, ptr));
    uint32_t r = b_.new_rule("ref");
    ref_rules_[ref] = r;
    DI_ASSIGN_OR_RETURN(Element e, gen(*target, ref.substr(1)));
    b_.add_alt(r, {e});
    return GrammarBuilder::call(r);
  }

  Result<Element> gen(const Json& s, const std::string& ptr) {
    DI_RETURN_IF_ERROR(b_.check_budget());
    if (++depth_ > 200) return resource_exhausted("json schema: nesting too deep at {}", ptr);
    auto result = gen_inner(s, ptr);
    --depth_;
    return result;
  }

  Result<Element> gen_inner(const Json& s, const std::string& ptr) {
    if (s.is_boolean()) return s.get<bool>() ? any_value() : never();
    if (!s.is_object()) return invalid_argument("json schema: schema at '{}' is not an object", ptr);
    if (s.contains("enum") || s.contains("const")) {
      // A finite set of values: every other keyword is decided per value by validation.
      if (auto e = enum_by_validation(s)) return *e;
    }
    {
      // Integer multipleOf under not/allOf/anyOf/oneOf: decided per remainder.
      DI_ASSIGN_OR_RETURN(auto residues, residue_number(s, ptr));
      if (residues) return *residues;
    }
    // With $ref, allOf, anyOf or oneOf next to it, `not` is merged into those first (a
    // conjunction distributes into anyOf and oneOf branches exactly).
    if (s.contains("not") && !s.contains("$ref") && !s.contains("allOf") && !s.contains("anyOf") &&
        !s.contains("oneOf")) {
      std::optional<Json> without = drop_simple_not(s);
      if (!without) return gen_not(s, ptr);
      return gen(*without, ptr);
    }
    if (s.contains("if") || s.contains("then") || s.contains("else")) return gen_if(s, ptr);
    for (const auto& [k, v] : s.items()) {
      if (kRefused.count(k))
        return unsupported("json schema: keyword '{}' at '{}/{}' is not supported", k, ptr, k);
    }
    if (s.contains("$ref") || s.contains("allOf")) {
      SchemaMerger merger([this](const std::string& r, const std::string& p) { return resolve(r, p); });
      if (s.contains("$ref") && !has_validation_siblings(s)) {
        if (!s["$ref"].is_string()) return invalid_argument("json schema: $ref at '{}' is not a string", ptr);
        return gen_ref(s["$ref"].get<std::string>(), ptr + "/$ref");
      }
      // $ref with siblings is inlined; one rule per distinct schema text, so a recursive
      // definition reached this way becomes a recursive rule instead of endless inlining.
      std::string key = s.dump();
      if (auto it = merged_rules_.find(key); it != merged_rules_.end()) return GrammarBuilder::call(it->second);
      uint32_t r = b_.new_rule("merged");
      merged_rules_[key] = r;
      DI_ASSIGN_OR_RETURN(Json merged, merger.flatten(s, ptr));
      DI_ASSIGN_OR_RETURN(Element e, gen(merged, ptr));
      b_.add_alt(r, {e});
      return GrammarBuilder::call(r);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return gen_union(s, ptr);
    DI_ASSIGN_OR_RETURN(auto cases, dependent_schema_cases(s, ptr));
    if (cases) return *cases;
    return gen_typed(s, ptr);
  }

  // if/then/else == (if and then) or (not if and else); then/else without if do nothing.
  Result<Element> gen_if(const Json& s, const std::string& ptr) {
    Json rest = s;
    for (const char* k : {"if", "then", "else"}) rest.erase(k);
    if (!s.contains("if")) return gen(rest, ptr);
    Json yes = Json::array({rest, s["if"]});
    if (s.contains("then")) yes.push_back(s["then"]);
    Json no = Json::array({rest, Json{{"not", s["if"]}}});
    if (s.contains("else")) no.push_back(s["else"]);
    DI_ASSIGN_OR_RETURN(Element a, gen(Json{{"allOf", yes}}, ptr + "/then"));
    DI_ASSIGN_OR_RETURN(Element b, gen(Json{{"allOf", no}}, ptr + "/else"));
    return rule("if_then_else", {{a}, {b}});
  }

  // The enum/const values that validate against all of `s`; nullopt when a verdict is unknown.
  std::optional<Element> enum_by_validation(const Json& s) {
    Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    if (!values.is_array()) return std::nullopt;
    InstanceValidator validator(root_, o_.enforce_formats);
    std::vector<Sequence> alts;
    for (const auto& v : values) {
      Verdict verdict = validator.validate(s, v);
      if (verdict == Verdict::kUnknown) return std::nullopt;
      if (verdict == Verdict::kValid) alts.push_back({literal_value(v)});
    }
    return rule("enum", std::move(alts));
  }

  // `not` in the decidable cases: not true/{} (nothing matches), not false (no constraint),
  // not {type: ...} (those types are removed). Returns the schema without `not`, or nullopt.
  static std::optional<Json> drop_simple_not(const Json& s) {
    const Json& n = s["not"];
    Json out = s;
    out.erase("not");
    if (n.is_boolean()) return n.get<bool>() ? Json(false) : out;
    if (!n.is_object() || n.contains("$ref") ||
        (has_validation_siblings(n) && !(n.contains("type") && n.size() == 1 + annotation_count(n))))
      return std::nullopt;
    if (!n.contains("type")) return Json(false);  // only annotations: matches everything
    std::set<std::string> banned;
    const Json& t = n["type"];
    if (t.is_string()) banned.insert(t.get<std::string>());
    else if (t.is_array()) for (const auto& x : t) if (x.is_string()) banned.insert(x.get<std::string>());
    if (banned.empty()) return std::nullopt;
    if (banned.count("number")) banned.insert("integer");
    std::vector<std::string> types = {"null", "boolean", "object", "array", "string", "number", "integer"};
    if (s.contains("type")) {
      types.clear();
      const Json& st = s["type"];
      if (st.is_string()) types.push_back(st.get<std::string>());
      else if (st.is_array()) for (const auto& x : st) if (x.is_string()) types.push_back(x.get<std::string>());
    }
    Json kept = Json::array();
    for (const auto& x : types) {
      if (banned.count(x)) continue;
      // "number but not integer" has no grammar here.
      if (x == "number" && banned.count("integer")) return std::nullopt;
      if (x == "integer" && std::find(types.begin(), types.end(), "number") != types.end() && !s.contains("type")) continue;
      kept.push_back(x);
    }
    if (kept.empty()) return Json(false);
    out["type"] = kept;
    return out;
  }
  static size_t annotation_count(const Json& s) {
    size_t n = 0;
    for (const auto& [k, v] : s.items()) n += k != "type" && !has_validation_siblings(Json{{k, v}});
    return n;
  }

  static bool has_validation_siblings(const Json& s) {
    static const std::set<std::string> kNote = {"$ref", "title", "description", "$comment",
        "examples", "default", "deprecated", "readOnly", "writeOnly", "$schema", "$id", "$defs",
        "definitions", "$anchor"};
    for (const auto& [k, v] : s.items())
      if (!kNote.count(k)) return true;
    return false;
  }

  Result<Element> gen_union(const Json& s, const std::string& ptr) {
    bool one = s.contains("oneOf");
    if (one && s.contains("anyOf")) {
      // (A1 or ... or An) and oneOf O == (A1 and oneOf O) or ... or (An and oneOf O): an anyOf
      // whose branches each merge one A_i with the oneOf (smaller schemas, so this ends).
      if (!s["anyOf"].is_array() || s["anyOf"].empty())
        return invalid_argument("json schema: 'anyOf' at '{}' must be a non-empty array", ptr);
      Json rest = s;
      rest.erase("oneOf");
      Json branches = Json::array();
      for (const auto& a : s["anyOf"]) branches.push_back({{"allOf", Json::array({a})}, {"oneOf", s["oneOf"]}});
      rest["anyOf"] = std::move(branches);
      return gen(rest, ptr);
    }
    const char* kw = one ? "oneOf" : "anyOf";
    const Json& branches = s[kw];
    if (!branches.is_array() || branches.empty())
      return invalid_argument("json schema: '{}' at '{}' must be a non-empty array", kw, ptr);
    Json rest = s;
    rest.erase(kw);
    SchemaMerger merger([this](const std::string& r, const std::string& p) { return resolve(r, p); });
    std::vector<Json> merged;
    for (size_t i = 0; i < branches.size(); ++i) {
      std::string bp = fmt::format("{}/{}/{}", ptr, kw, i);
      Json combo = {{"allOf", Json::array({rest, branches[i]})}};
      DI_ASSIGN_OR_RETURN(Json m, merger.flatten(combo, bp));
      merged.push_back(std::move(m));
    }
    // oneOf: branches that may overlap another become the objects matching them and none of
    // those others (json_schema_one_of.cc); refused when that cannot be written.
    std::vector<std::vector<size_t>> overlaps(merged.size());
    if (one)
      for (size_t i = 0; i < merged.size(); ++i)
        for (size_t j = 0; j < merged.size(); ++j)
          if (i != j && !merger.pairwise_disjoint({merged[i], merged[j]})) overlaps[i].push_back(j);
    // With nothing to merge in, branches go through gen() so a $ref branch stays a shared
    // (possibly recursive) rule instead of being inlined again and again.
    bool rest_trivial = !has_validation_siblings(rest);
    std::vector<Sequence> alts;
    for (size_t i = 0; i < merged.size(); ++i) {
      std::string bp = fmt::format("{}/{}/{}", ptr, kw, i);
      if (!overlaps[i].empty()) {
        // Branch i and not any branch it may overlap, every type complemented by gen_not.
        DI_ASSIGN_OR_RETURN(auto only, one_of_by_not(merged, i, overlaps[i], bp));
        if (only) {
          alts.push_back({*only});
          continue;
        }
        // Else objects and strings of branch i that no overlapping branch matches (other
        // types of the branch are left out: a sound subset); refused when neither can be
        // written.
        DI_ASSIGN_OR_RETURN(auto cases, one_of_cases(merged, i, overlaps[i]));
        DI_ASSIGN_OR_RETURN(auto strings, one_of_strings(merged, i, overlaps[i]));
        auto arrays = one_of_arrays(merged, i, overlaps[i]);
        if (!cases && !strings && !arrays)
          return unsupported("json schema: keyword 'oneOf' at '{}/oneOf' has branches that may overlap", ptr);
        if (arrays) {
          DI_ASSIGN_OR_RETURN(Element e, gen(*arrays, bp));
          alts.push_back({e});
        }
        for (const Json& c : cases.value_or(std::vector<Json>{})) {
          DI_ASSIGN_OR_RETURN(Element e, gen(c, bp));
          alts.push_back({e});
        }
        if (strings) alts.push_back({*strings});
        continue;
      }
      const Json& branch = rest_trivial ? branches[i] : merged[i];
      DI_ASSIGN_OR_RETURN(Element e, gen(branch, bp));
      alts.push_back({e});
    }
    return rule(kw, std::move(alts));
  }

  // Branch i of a oneOf and none of `others` as `allOf [branch, not anyOf others]`; nullopt
  // when gen_not cannot write that (the builder's memo tables are restored, so rules of the
  // failed attempt are left unreachable instead of half-built and shared).
  Result<std::optional<Element>> one_of_by_not(const std::vector<Json>& merged, size_t i,
                                               const std::vector<size_t>& others,
                                               const std::string& ptr) {
    Json negated = Json::array();
    for (size_t j : others) negated.push_back(merged[j]);
    Json only = {{"allOf", Json::array({merged[i], Json{{"not", Json{{"anyOf", negated}}}}})}};
    auto refs = ref_rules_;
    auto merges = merged_rules_;
    auto e = gen(only, ptr);
    if (e.is_ok()) return std::optional<Element>(*e);
    if (e.status().code() != StatusCode::kUnsupported) return e.status();
    ref_rules_ = std::move(refs);
    merged_rules_ = std::move(merges);
    return std::optional<Element>();
  }

  Result<Element> gen_typed(const Json& s, const std::string& ptr);
  Result<Element> gen_string(const Json& s, const std::string& ptr);
  // `excluded`: integer values left out (integer mode only; `not` with an enum).
  Result<Element> gen_number(const Json& s, const std::string& ptr, bool integer,
                             const std::set<int64_t>* excluded = nullptr);
  // json_schema_not.cc: `not` beyond the cases drop_simple_not removes, type by type.
  Result<Element> gen_not(const Json& s, const std::string& ptr);
  // Multiples of k; without negatives when !negative, without 0 when !zero.
  Element integer_multiple_of(int k, bool negative = true, bool zero = true);
  // multipleOf m between two bounds, when there are at most 1000 such values: the values
  // themselves in their shortest decimal spelling; nullopt otherwise.
  std::optional<Element> enumerated_multiples(const Json& s, double m, bool integer);
  // json_schema_residues.cc: numbers whose only constraints are integer multipleOf under
  // not/allOf/anyOf/oneOf/$ref, as a remainder automaton; nullopt when s is not of that kind.
  // With bounds too (then only below a magnitude cap): the values below a power of ten above
  // the bounds are spelled out and minimized away. `plain`: also without a combinator.
  Result<std::optional<Element>> residue_number(const Json& s, const std::string& ptr,
                                                bool plain = false);
  Result<std::optional<Element>> bounded_residues(const Json& s, const std::vector<double>& bounds,
                                                  int64_t modulus, const std::string& ptr);
  Result<Element> gen_array(const Json& s, const std::string& ptr);
  // `contains` (json_schema_arrays.cc): items with one of them also matching `contains`.
  Result<Element> contains_array(const Json& s, const Json& items, int64_t min, int64_t max,
                                 const std::string& ptr);
  // Several `contains` at once (a list, as the allOf merge writes them).
  Result<Element> contains_all(const Json& list, const Json& items, int64_t min, int64_t max,
                               const std::string& ptr);
  // uniqueItems over a small finite item domain: one rule per set of values already written.
  Result<std::optional<Element>> unique_array(const Json& items, int64_t min, int64_t max);
  Result<Element> gen_object(const Json& s, const std::string& ptr);
  // json_schema_pattern_members.cc: patternProperties.
  Result<std::optional<Json>> pattern_conjunction(const Json& pp, const std::string& name,
                                                  const Json* declared, const Json* addl);
  // json_schema_one_of.cc: objects matching branch i and none of `others` (which may overlap
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
  // json_schema_dependencies.cc: dependentRequired / dependencies, as names each present
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

};

}  // namespace deepinfer::structured::detail
