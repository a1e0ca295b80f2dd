// `not` beyond the cases drop_simple_not removes: the instance types are taken one at a time,
// and each is complemented where that is exact (literals by validation, strings by automaton
// difference, integers minus listed values, numbers and arrays by the reasons for failing
// bounds and items) or under-approximated soundly (objects: the reasons an object fails the
// negated schema, as in overlapping oneOf). Several negated schemas (not of an anyOf) are
// complemented together. Anything else is refused.
#include "deepinfer/structured/json_schema/schema_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"

namespace deepinfer::structured::detail {
namespace {

// Whether an instance of type t can match n (false: `not n` holds for every such instance).
bool may_match(const Json& n, const std::string& t) {
  if (n.is_boolean()) return n.get<bool>();
  std::vector<std::string> nt = declared_types(n);
  bool typed = std::find(nt.begin(), nt.end(), t) != nt.end() ||
               (t == "integer" && std::find(nt.begin(), nt.end(), "number") != nt.end()) ||
               (t == "number" && std::find(nt.begin(), nt.end(), "integer") != nt.end());
  if (!typed) return false;
  if (n.contains("enum") || n.contains("const")) {
    Json values = n.contains("const") ? Json::array({n["const"]}) : n["enum"];
    if (!values.is_array()) return true;
    for (const auto& v : values)
      if (value_has_type(v, t == "integer" ? "number" : t)) return true;
    return false;
  }
  return true;
}

// Whether n says nothing about instances of type t beyond their type (so all of them match).
bool vacuous_for(const Json& n, const std::string& t) {
  static const std::set<std::string> kAny = {"enum",  "const", "not",         "allOf",
                                             "anyOf", "oneOf", "$ref",        "if",
                                             "then",  "else",  "$dynamicRef", "$recursiveRef"};
  static const std::set<std::string> kNumber = {"minimum", "maximum", "exclusiveMinimum",
                                                "exclusiveMaximum", "multipleOf"};
  static const std::set<std::string> kArray = {
      "items",       "prefixItems", "additionalItems", "minItems",    "maxItems",
      "uniqueItems", "contains",    "minContains",     "maxContains", "unevaluatedItems"};
  if (!n.is_object()) return false;
  std::vector<std::string> nt = declared_types(n);
  if (t == "number" && std::find(nt.begin(), nt.end(), "number") == nt.end())
    return false;  // only integers
  for (const auto& [k, v] : n.items()) {
    if (kAny.count(k)) return false;
    if ((t == "number" || t == "integer") && kNumber.count(k)) return false;
    if (t == "array" && kArray.count(k)) return false;
  }
  return t == "number" || t == "integer" || t == "array";
}

// The ways an array can fail n, one schema each (their union is exactly "not n" over
// arrays): an item failing `items`, too few or too many items. nullopt when n has array
// keywords beyond those, or keywords that apply to every type.
std::optional<std::vector<Json>> array_reasons(const Json& n) {
  static const std::set<std::string> kHandled = {"items", "minItems", "maxItems", "type",
                                                 "contains"};
  static const std::set<std::string> kOther = {"prefixItems", "additionalItems",
                                               "uniqueItems", "minContains",
                                               "maxContains", "unevaluatedItems",
                                               "enum",        "const",
                                               "not",         "allOf",
                                               "anyOf",       "oneOf",
                                               "$ref",        "if",
                                               "then",        "else",
                                               "$dynamicRef", "$recursiveRef"};
  if (!n.is_object()) return std::nullopt;
  std::vector<Json> out;
  for (const auto& [k, v] : n.items()) {
    if (kOther.count(k)) return std::nullopt;
    if (!kHandled.count(k)) continue;  // other types' keywords say nothing about arrays
    if (k == "items") {
      if (!v.is_object() && !v.is_boolean()) return std::nullopt;  // tuple form
      out.push_back(Json{{"contains", Json{{"not", v}}}});
    } else if (k == "contains") {
      // Failing `contains X` (minContains/maxContains are refused above) is every item
      // failing X; a list of them (the allOf merge's) is failed by failing one.
      if (n.contains("minContains") || n.contains("maxContains")) return std::nullopt;
      for (const auto& c : v.is_array() ? v : Json::array({v}))
        out.push_back(Json{{"items", Json{{"not", c}}}});
    } else if (k == "minItems" || k == "maxItems") {
      if (!v.is_number()) return std::nullopt;
      double x = v.get<double>();
      if (k == "minItems" && x > 0) out.push_back(Json{{"maxItems", std::ceil(x) - 1}});
      if (k == "maxItems") out.push_back(Json{{"minItems", std::floor(x) + 1}});
    }
  }
  return out;
}

// The ways a number can fail n's bounds, one schema each: below a minimum, above a maximum
// (draft-4 boolean exclusives included). Failing an integer type is left out (non-integers
// have no grammar here), which only narrows "not n": sound. nullopt when n has multipleOf or
// keywords that apply to every type.
std::optional<std::vector<Json>> number_reasons(const Json& n) {
  static const std::set<std::string> kOther = {
      "multipleOf", "enum", "const", "not",  "allOf",       "anyOf",        "oneOf",
      "$ref",       "if",   "then",  "else", "$dynamicRef", "$recursiveRef"};
  if (!n.is_object()) return std::nullopt;
  auto flag = [&](const char* k) { return n.contains(k) && n[k].is_boolean() && n[k].get<bool>(); };
  std::vector<Json> out;
  for (const auto& [k, v] : n.items()) {
    if (kOther.count(k)) return std::nullopt;
    if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (v.is_boolean()) continue;  // draft 4: read with its bound below
      if (!v.is_number()) return std::nullopt;
      bool lower = k == "minimum" || k == "exclusiveMinimum";
      bool exclusive = k[0] == 'e' || flag(lower ? "exclusiveMinimum" : "exclusiveMaximum");
      // Failing `x >= a` is `x < a`; failing `x > a` is `x <= a` (and mirrored for maxima).
      const char* key = lower ? (exclusive ? "maximum" : "exclusiveMaximum")
                              : (exclusive ? "minimum" : "exclusiveMinimum");
      out.push_back(Json{{key, v}});
    }
  }
  return out;
}

// Whether every instance of `s` matches `n`, read off the keywords: each of n's keywords is
// also in s with the same value, and so are the siblings its meaning depends on. Both are
// flattened (no $ref at the top).
bool subsumed_by(const Json& s, const Json& n) {
  static const std::set<std::string> kNote = {
      "title",     "description", "$comment", "examples", "default",     "deprecated", "readOnly",
      "writeOnly", "$schema",     "$id",      "$defs",    "definitions", "$anchor",    "comment"};
  static const std::vector<std::vector<std::string>> kGroups = {
      {"items", "prefixItems", "additionalItems"},
      {"properties", "patternProperties", "additionalProperties"},
      {"contains", "minContains", "maxContains"},
      {"if", "then", "else"},
      {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}};
  static const std::set<std::string> kContextual = {"$ref", "$dynamicRef", "$recursiveRef",
                                                    "unevaluatedItems", "unevaluatedProperties"};
  if (n.is_boolean()) return n.get<bool>();
  if (s.is_boolean()) return !s.get<bool>();
  if (!s.is_object() || !n.is_object()) return false;
  for (const auto& [k, v] : s.items())
    if (kContextual.count(k)) return false;
  for (const auto& [k, v] : n.items()) {
    if (kNote.count(k)) continue;
    if (kContextual.count(k) || !s.contains(k)) return false;
    if (k == "type") {
      std::vector<std::string> st = declared_types(s), nt = declared_types(n);
      for (const auto& t : st) {
        bool in = std::find(nt.begin(), nt.end(), t) != nt.end() ||
                  (t == "integer" && std::find(nt.begin(), nt.end(), "number") != nt.end());
        if (!in) return false;
      }
      continue;
    }
    if (s[k] != v) return false;
    for (const auto& g : kGroups) {
      if (std::find(g.begin(), g.end(), k) == g.end()) continue;
      for (const auto& o : g)
        if (s.contains(o) != n.contains(o) || (s.contains(o) && s[o] != n[o])) return false;
    }
  }
  return true;
}

}  // namespace

// `not` next to other keywords: the complement of the negated schema(s) within each type the
// rest allows (not_complement); with if/then/else beside it, the conditional's two cases
// when the complement cannot be written whole.
Result<Element> SchemaCompiler::gen_not(const Json& s, const std::string& ptr) {
  if (!s.contains("if") && !s.contains("then") && !s.contains("else")) return not_complement(s, ptr);
  // if/then/else next to `not`: when the complement cannot be written with the conditional
  // in it, split into the conditional's two cases (each keeps the `not`, and the else case's
  // `not if` joins it). The memo tables are restored so the failed attempt's rules stay
  // unreachable.
  auto refs = ref_rules_;
  auto merges = merged_rules_;
  auto whole = not_complement(s, ptr);
  if (whole.is_ok() || whole.status().code() != StatusCode::kUnsupported) return whole;
  ref_rules_ = std::move(refs);
  merged_rules_ = std::move(merges);
  auto split = gen_if(s, ptr);
  if (split.is_ok() || split.status().code() != StatusCode::kUnsupported) return split;
  return whole.status();
}

Result<Element> SchemaCompiler::not_complement(const Json& s, const std::string& ptr) {
  auto refuse = [&] {
    return unsupported(
        "json schema: keyword 'not' at '{}/not' is not supported in this form (its complement is "
        "written type by type from bounds, integer multipleOf, contains, enum/const, types, "
        "required names and string automata; this one needs more)",
        ptr);
  };
  Json rest = s;
  rest.erase("not");
  SchemaMerger merger = new_merger();
  DI_ASSIGN_OR_RETURN(Json n, merger.flatten(s["not"], ptr + "/not"));
  if (rest.contains("$ref") || rest.contains("allOf") || rest.contains("anyOf") ||
      rest.contains("oneOf"))
    return refuse();
  if (n.is_object() && n.contains("not")) {
    // not (not X) == X, when n says nothing else.
    Json inner = n;
    inner.erase("not");
    if (!has_validation_siblings(inner))
      return gen(Json{{"allOf", Json::array({rest, n["not"]})}}, ptr + "/not/not");
  }
  // not (X or Y ...) (what the allOf merge makes of two nots) == not X and not Y: every
  // negated schema is complemented within each type at once.
  std::vector<Json> ns;
  DI_RETURN_IF_ERROR(not_split(merger, n, ptr + "/not", ns));
  std::vector<std::string> types = declared_types(rest);
  bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  InstanceValidator validator = new_validator();
  for (const Json& x : ns)
    if (subsumed_by(rest, x)) return never();  // every instance of rest matches x
  std::vector<Sequence> alts;
  for (const auto& t : types) {
    if (t == "integer" && has_number) continue;  // number covers it
    Json rt = rest;
    rt["type"] = t;
    if (std::any_of(ns.begin(), ns.end(), [&](const Json& x) { return subsumed_by(rt, x); }))
      continue;
    std::vector<Json> live;  // the negated schemas some instance of type t may match
    bool all_match = false;
    for (const Json& x : ns)
      if (may_match(x, t)) {
        live.push_back(x);
        all_match = all_match || vacuous_for(x, t);
      }
    if (live.empty()) {
      DI_ASSIGN_OR_RETURN(Element e, gen(rt, ptr));
      alts.push_back({e});
      continue;
    }
    if (all_match) continue;  // every instance of this type matches one of them
    auto is_enum = [](const Json& x) {
      return x.is_object() && (x.contains("enum") || x.contains("const"));
    };
    bool any_enum = std::any_of(live.begin(), live.end(), is_enum);
    bool written = true;
    if (t == "null" || t == "boolean") {
      DI_ASSIGN_OR_RETURN(written, not_literals(t, rt, live, validator, alts));
    } else if (t == "string") {
      DI_ASSIGN_OR_RETURN(written, not_strings(rt, live, alts));
    } else if (t == "object") {
      DI_ASSIGN_OR_RETURN(written, not_objects(rt, live, ptr, alts));
    } else if (t == "array" || ((t == "number" || t == "integer") && !any_enum)) {
      DI_ASSIGN_OR_RETURN(written, not_by_reasons(t, rt, live, ptr, alts));
    } else if (t == "integer" && live.size() == 1 && is_enum(live[0]) &&
               !rt.contains("multipleOf")) {
      // Integers minus the listed values; any other keyword of n only narrows what it
      // matches, so excluding all listed integers is sound (and exact when n is the list).
      const Json& x = live[0];
      Json values = x.contains("const") ? Json::array({x["const"]}) : x["enum"];
      std::set<int64_t> excluded;
      for (const auto& v : values)
        if (v.is_number() && std::floor(v.get<double>()) == v.get<double>() &&
            std::abs(v.get<double>()) < 9e18)
          excluded.insert(static_cast<int64_t>(v.get<double>()));
      DI_ASSIGN_OR_RETURN(Element e, gen_number(rt, ptr, true, &excluded));
      alts.push_back({e});
    } else {
      return refuse();
    }
    if (!written) return refuse();
  }
  return rule("not", std::move(alts));
}

// Splits the negated schema into the schemas of its anyOf branches (recursively), which are
// then complemented together.
Status SchemaCompiler::not_split(SchemaMerger& merger, const Json& x, const std::string& p,
                                 std::vector<Json>& ns) {
  if (x.is_object() && x.contains("anyOf") && x["anyOf"].is_array() && !x["anyOf"].empty()) {
    Json other = x;
    other.erase("anyOf");
    // Siblings distribute into the branches: S and (X or Y) == (S and X) or (S and Y),
    // exact as long as each merge is (the merger refuses one that is not; then x is
    // kept whole).
    bool plain = !has_validation_siblings(other);
    std::vector<std::pair<Json, std::string>> branches;
    for (size_t i = 0; i < x["anyOf"].size(); ++i) {
      std::string bp = fmt::format("{}/anyOf/{}", p, i);
      auto b = plain ? merger.flatten(x["anyOf"][i], bp)
                     : merger.flatten(Json{{"allOf", Json::array({other, x["anyOf"][i]})}}, bp);
      if (!b.is_ok()) {
        if (plain || b.status().code() != StatusCode::kUnsupported) return b.status();
        branches.clear();
        break;
      }
      branches.emplace_back(std::move(*b), bp);
    }
    if (!branches.empty()) {
      for (const auto& [b, bp] : branches) DI_RETURN_IF_ERROR(not_split(merger, b, bp, ns));
      return Status::ok();
    }
  }
  ns.push_back(x);
  return Status::ok();
}

// null / boolean: the literals of the type that rt accepts and no negated schema does. False
// when a verdict is unknown.
Result<bool> SchemaCompiler::not_literals(const std::string& t, const Json& rt,
                                          const std::vector<Json>& live,
                                          InstanceValidator& validator, std::vector<Sequence>& alts) {
  std::vector<Json> literals =
      t == "null" ? std::vector<Json>{nullptr} : std::vector<Json>{true, false};
  for (const auto& v : literals) {
    Verdict own = validator.validate(rt, v);
    bool keep = own == Verdict::kValid;
    if (own == Verdict::kUnknown) return false;
    for (const Json& x : live) {
      Verdict neg = validator.validate(x, v);
      if (neg == Verdict::kUnknown) return false;
      keep = keep && neg == Verdict::kInvalid;
    }
    if (keep) alts.push_back({literal_value(v)});
  }
  return true;
}

// Strings of rt that no negated schema matches, as one automaton. False when a language
// cannot be written.
Result<bool> SchemaCompiler::not_strings(const Json& rt, const std::vector<Json>& live,
                                         std::vector<Sequence>& alts) {
  // Length bounds are applied last, to the difference: it is usually far smaller than
  // rt's own pattern-times-length automaton, and past the state cap maxLength is
  // tightened (fewer strings, all valid) as for a plain string.
  Json unbounded = rt;
  auto count = [&](const char* k, int64_t dflt) {
    return rt.contains(k) && rt[k].is_number() ? static_cast<int64_t>(rt[k].get<double>())
                                               : dflt;
  };
  int64_t lo = std::max<int64_t>(0, count("minLength", 0)), hi = count("maxLength", -1);
  if (hi >= 0 && hi < lo) return true;  // no strings
  unbounded.erase("minLength");
  unbounded.erase("maxLength");
  std::vector<CodePointDfa> langs;  // rt's strings, then each negated schema's
  DI_ASSIGN_OR_RETURN(auto own, string_language(unbounded));
  if (!own) return false;
  langs.push_back(std::move(*own));
  for (const Json& x : live) {
    DI_ASSIGN_OR_RETURN(auto neg, string_language(x));
    if (!neg) return false;
    langs.push_back(std::move(*neg));
  }
  std::vector<const CodePointDfa*> parts;
  for (const auto& l : langs) parts.push_back(&l);
  DI_ASSIGN_OR_RETURN(CodePointDfa only, dfa_product(parts, [](const std::vector<bool>& a) {
                        return a[0] && std::find(a.begin() + 1, a.end(), true) == a.end();
                      }));
  if (lo > 0 || hi >= 0) {
    only = dfa_minimize(only);
    auto [shortest, longest] = dfa_length_range(only);
    if (shortest >= lo) lo = 0;
    if (hi >= 0 && longest >= 0 && longest <= hi) hi = -1;
  }
  if (lo > 0 || hi >= 0) {
    if (lo > kMaxLengthExpand) return false;
    if (hi > lo) hi = std::max(dfa_length_fit(only, hi), lo);
    DI_ASSIGN_OR_RETURN(only, dfa_with_length(only, lo, hi));
  }
  alts.push_back({rule(
      "not_string", {cat({lit("\""), {dfa_to_rule(b_, only, true, "str_dfa")}, lit("\"")})})});
  return true;
}

// Objects of rt that no negated schema matches, as the oneOf cases. False when the cases
// cannot be written.
Result<bool> SchemaCompiler::not_objects(const Json& rt, const std::vector<Json>& live,
                                         const std::string& ptr, std::vector<Sequence>& alts) {
  std::vector<Json> all = {rt};
  std::vector<size_t> others;
  for (const Json& x : live) {
    others.push_back(all.size());
    all.push_back(x);
  }
  DI_ASSIGN_OR_RETURN(auto cases, one_of_cases(all, 0, others));
  if (!cases) return false;
  // A case whose own keywords we cannot lower (a format we do not support, ...) is
  // left out: it is one reason among the union's, so fewer objects, all valid. With
  // several cases the memo tables then go back to before the loop, so a later case
  // does not reuse a rule the failed one left half-built; a lone case's leftovers stay
  // (copying the tables for it cost a few percent of compile time), and are sound: a
  // half-built rule has only some of its alternatives, so it accepts fewer values.
  std::optional<std::pair<decltype(ref_rules_), decltype(merged_rules_)>> memo;
  if (cases->size() > 1) memo.emplace(ref_rules_, merged_rules_);
  for (const Json& c : *cases) {
    auto e = gen(c, ptr);
    if (e.is_ok()) {
      alts.push_back({*e});
      continue;
    }
    if (e.status().code() != StatusCode::kUnsupported) return e.status();
    if (memo) {
      ref_rules_ = memo->first;
      merged_rules_ = memo->second;
    }
  }
  return true;
}

// Arrays and numbers: each negated schema fails for one of its reasons, and the cases are
// the combinations of reasons. False when a schema's reasons cannot be written.
Result<bool> SchemaCompiler::not_by_reasons(const std::string& t, const Json& rt,
                                            const std::vector<Json>& live, const std::string& ptr,
                                            std::vector<Sequence>& alts) {
  // One reason per negated schema: the cases are their combinations.
  constexpr size_t kMaxNotCases = 64;
  std::vector<Json> combos = {Json::array({rt})};
  auto integer_only = [](const Json& x) {
    std::vector<std::string> nt = declared_types(x);
    return std::find(nt.begin(), nt.end(), "number") == nt.end() && vacuous_for(x, "integer");
  };
  if (t == "number" && vacuous_for(rt, "number") &&
      std::all_of(live.begin(), live.end(), integer_only)) {
    // Numbers that are not integers (rt and the negated schemas say nothing else about
    // numbers): spelled without exponent, with a non-zero fraction digit (a sound subset).
    ByteSet digit, nonzero;
    digit.set_range('0', '9');
    nonzero.set_range('1', '9');
    Element digits = b_.star({b_.bytes(digit)}, "digits");
    Element whole = rule("int_part", {lit("0"), {b_.bytes(nonzero), digits}});
    alts.push_back({rule("non_integer", {cat({{b_.optional(lit("-"), "sign"), whole},
                                              lit("."),
                                              {digits, b_.bytes(nonzero), digits}})})});
    return true;
  }
  if (t != "array") {
    // Integer multipleOf with bounds has no reasons as schemas; the integers matching rt
    // and none of the negated schemas may still be an automaton (residues.cc).
    bool residues =
        std::any_of(live.begin(), live.end(), [](const Json& x) { return !number_reasons(x); });
    if (residues) {
      Json only = {{"type", t},
                   {"allOf", Json::array({rt, Json{{"not", Json{{"anyOf", live}}}}})}};
      DI_ASSIGN_OR_RETURN(auto e, residue_number(only, ptr));
      if (!e) return false;
      alts.push_back({*e});
      return true;
    }
  }
  for (const Json& x : live) {
    std::optional<std::vector<Json>> reasons =
        t == "array" ? array_reasons(x) : number_reasons(x);
    if (!reasons) return false;
    // Numbers failing only by not being integers have no grammar: refused rather than
    // silently left with nothing.
    if (reasons->empty() || combos.size() * reasons->size() > kMaxNotCases) return false;
    std::vector<Json> next;
    for (const Json& c : combos)
      for (const Json& r : *reasons) {
        Json more = c;
        more.push_back(r);
        next.push_back(std::move(more));
      }
    combos = std::move(next);
  }
  for (const Json& c : combos) {
    DI_ASSIGN_OR_RETURN(Element e, gen(Json{{"allOf", c}}, ptr));
    alts.push_back({e});
  }
  return true;
}

}  // namespace deepinfer::structured::detail
