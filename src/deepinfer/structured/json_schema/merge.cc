// Schema flattening: $ref inlining and the allOf merge (see merge.h); the oneOf
// disjointness test is in disjoint.cc.
#include "deepinfer/structured/json_schema/merge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/automata/regex_ast.h"

namespace deepinfer::structured {
namespace {
using Json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {
    "title",      "description", "$comment",  "examples",         "default",
    "deprecated", "readOnly",    "writeOnly", "$schema",          "$id",
    "$defs",      "definitions", "$anchor",   "contentMediaType", "contentEncoding"};
// Keywords with a meaning in some draft; any other key is an annotation (2020-12), so two
// different values of it do not conflict.
const std::set<std::string> kKeywords = {"type",
                                         "enum",
                                         "const",
                                         "multipleOf",
                                         "maximum",
                                         "exclusiveMaximum",
                                         "minimum",
                                         "exclusiveMinimum",
                                         "maxLength",
                                         "minLength",
                                         "pattern",
                                         "maxItems",
                                         "minItems",
                                         "uniqueItems",
                                         "maxContains",
                                         "minContains",
                                         "maxProperties",
                                         "minProperties",
                                         "required",
                                         "dependentRequired",
                                         "allOf",
                                         "anyOf",
                                         "oneOf",
                                         "not",
                                         "if",
                                         "then",
                                         "else",
                                         "dependentSchemas",
                                         "dependencies",
                                         "prefixItems",
                                         "items",
                                         "additionalItems",
                                         "contains",
                                         "properties",
                                         "patternProperties",
                                         "additionalProperties",
                                         "propertyNames",
                                         "unevaluatedItems",
                                         "unevaluatedProperties",
                                         "$ref",
                                         "$dynamicRef",
                                         "$recursiveRef",
                                         "format"};

// pattern A and pattern B (search semantics) as one pattern: a lookahead finds A from the
// start, the body finds B. nullopt when either does not parse on its own (so wrapping cannot
// change its meaning, e.g. a trailing backslash escaping our ')').
// The result is `^` + one lookahead per pattern + `[\s\S]*`; a conjunction made here is
// extended with one more lookahead rather than nested (nested lookaheads are refused).
std::optional<std::string> pattern_conjunction(const Json& a, const Json& b,
                                               std::set<std::string>& made) {
  if (!a.is_string() || !b.is_string()) return std::nullopt;
  const std::string x = a.get<std::string>(), y = b.get<std::string>();
  const std::string any = "[\\s\\S]*";
  auto look = [&](const std::string& p) { return "(?=" + any + "?(?:" + p + "))"; };
  if (!parse_regex(y, true).is_ok()) return std::nullopt;
  std::string out;
  if (made.count(x)) {
    out = x.substr(0, x.size() - any.size()) + look(y) + any;
  } else {
    if (!parse_regex(x, true).is_ok()) return std::nullopt;
    out = "^" + look(x) + look(y) + any;
  }
  made.insert(out);
  return out;
}

// Two lists of union branches as one list of pairwise conjunctions: exact for anyOf (some x
// and some y), and for oneOf (exactly one pair matches iff exactly one x and one y do).
std::optional<Json> cross_branches(const Json& x, const Json& y) {
  constexpr size_t kMaxCrossBranches = 64;
  if (!x.is_array() || !y.is_array() || x.size() * y.size() > kMaxCrossBranches)
    return std::nullopt;
  Json out = Json::array();
  for (const auto& a : x)
    for (const auto& b : y) out.push_back(Json{{"allOf", Json::array({a, b})}});
  return out;
}

// if/then/else as the union (if and then) or (not if and else).
Json if_as_union(const Json& s) {
  Json yes = Json::array({s["if"]}), no = Json::array({Json{{"not", s["if"]}}});
  if (s.contains("then")) yes.push_back(s["then"]);
  if (s.contains("else")) no.push_back(s["else"]);
  return Json::array({Json{{"allOf", yes}}, Json{{"allOf", no}}});
}

bool is_trivial(const Json& v) { return v == Json(true) || v == Json::object(); }

// A positive decimal with at most 6 fraction digits as p/q in lowest terms (q a divisor of
// 10^6), when that reading is exact to the double; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> decimal_fraction(double x) {
  if (!(x > 0) || x >= 1e9) return std::nullopt;
  for (int64_t q = 1; q <= 1'000'000; q *= 10) {
    double scaled = x * static_cast<double>(q);
    int64_t p = static_cast<int64_t>(std::llround(scaled));
    if (p > 0 && static_cast<double>(p) / static_cast<double>(q) == x) {
      int64_t g = std::gcd(p, q);
      return std::pair<int64_t, int64_t>{p / g, q / g};
    }
  }
  return std::nullopt;
}

// lcm(a, b) of two positive fractions in lowest terms, as p/q in lowest terms; nullopt when p
// would pass 10^15 (or a double could not hold the quotient exactly enough).
std::optional<std::pair<int64_t, int64_t>> rational_lcm(std::pair<int64_t, int64_t> a,
                                                        std::pair<int64_t, int64_t> b) {
  int64_t g = std::gcd(a.first, b.first);
  __int128 p = static_cast<__int128>(a.first / g) * b.first;
  if (p > static_cast<__int128>(1'000'000'000'000'000)) return std::nullopt;
  int64_t q = std::gcd(a.second, b.second);
  int64_t pp = static_cast<int64_t>(p);
  int64_t r = std::gcd(pp, q);
  pp /= r;
  q /= r;
  if (q != 1 && static_cast<double>(pp) / static_cast<double>(q) * static_cast<double>(q) !=
                    static_cast<double>(pp))
    return std::nullopt;
  return std::pair<int64_t, int64_t>{pp, q};
}

// `name` as a regex matching exactly it: letters and digits as themselves, anything else as
// a \u{...} escape (valid ECMAScript with the u flag, and understood by parse_regex).
std::string regex_literal(const std::string& name) {
  std::string out;
  for (uint32_t cp : decode_utf8(name)) {
    if (cp < 0x80 && std::isalnum(static_cast<int>(cp)))
      out += static_cast<char>(cp);
    else
      out += fmt::format("\\u{{{:X}}}", cp);
  }
  return out;
}

// The names an object schema's additionalProperties governs (not in `properties`, matching
// none of its patternProperties) as one pattern with search semantics; nullopt when one of
// its patterns does not parse on its own or the result does not parse.
std::optional<std::string> undeclared_unmatched_pattern(const Json& x) {
  std::string out = "^";
  if (x.contains("properties") && x["properties"].is_object() && !x["properties"].empty()) {
    std::string names;
    for (const auto& [k, v] : x["properties"].items()) {
      if (!names.empty()) names += '|';
      names += regex_literal(k);
    }
    out += "(?!(?:" + names + ")$)";
  }
  if (x.contains("patternProperties")) {
    if (!x["patternProperties"].is_object()) return std::nullopt;
    for (const auto& [pk, pv] : x["patternProperties"].items()) {
      if (!parse_regex(pk, true).is_ok()) return std::nullopt;
      out += "(?![\\s\\S]*?(?:" + pk + "))";
    }
  }
  out += "[\\s\\S]*";
  if (!parse_regex(out, true).is_ok()) return std::nullopt;
  return out;
}

bool subset_keys(const Json& props_b, const Json& a) {
  if (!props_b.is_object()) return true;
  for (const auto& [k, v] : props_b.items())
    if (!a.contains("properties") || !a["properties"].contains(k)) return false;
  return true;
}
}  // namespace

Result<Json> SchemaMerger::flatten(const Json& s, const std::string& ptr) {
  if (!s.is_object()) return s;
  if (++depth_ > 32) {
    --depth_;
    return unsupported("json schema: allOf/$ref chain at '{}' is too deep or recursive", ptr);
  }
  struct Guard {
    int& d;
    ~Guard() { --d; }
  } guard{depth_};
  Json base = s;
  Json out = Json::object();
  if (base.contains("$ref")) {
    if (!base["$ref"].is_string())
      return invalid_argument("json schema: $ref at '{}' is not a string", ptr);
    DI_ASSIGN_OR_RETURN(const Json* target,
                        resolve_(base["$ref"].get<std::string>(), ptr + "/$ref"));
    base.erase("$ref");
    DI_ASSIGN_OR_RETURN(out, flatten(*target, ptr + "/$ref"));
  }
  Json subs = Json::array();
  if (base.contains("allOf")) {
    subs = base["allOf"];
    base.erase("allOf");
    if (!subs.is_array())
      return invalid_argument("json schema: allOf at '{}' is not an array", ptr);
  }
  DI_ASSIGN_OR_RETURN(out, merge(std::move(out), base, ptr));
  for (size_t i = 0; i < subs.size(); ++i) {
    std::string sp = fmt::format("{}/allOf/{}", ptr, i);
    DI_ASSIGN_OR_RETURN(Json f, flatten(subs[i], sp));
    DI_ASSIGN_OR_RETURN(out, merge(std::move(out), f, sp));
  }
  return out;
}

// The allOf merge of two schemas, in stages: names one side declares are declared on the
// other with its additionalProperties (merge_declared_names), additionalProperties facing the
// other side's patternProperties become pattern properties (merge_pattern_clash), two
// if/then/else become a union, then keyword by keyword (merge_keyword).
Result<Json> SchemaMerger::merge(Json a, const Json& b, const std::string& ptr) {
  if (b.is_boolean()) return b.get<bool>() ? a : Json(false);
  if (a.is_boolean()) return a.get<bool>() ? b : a;
  Json bb = b;
  Json* sides[2] = {&a, &bb};
  DI_RETURN_IF_ERROR(merge_declared_names(sides, ptr));
  DI_RETURN_IF_ERROR(merge_pattern_clash(sides, ptr));
  // Two if/then/else become one union of cases, merged as anyOf below.
  if (a.contains("if") && bb.contains("if")) {
    Json u = if_as_union(bb);
    for (const char* k : {"if", "then", "else"}) bb.erase(k);
    if (bb.contains("anyOf")) {
      auto c = cross_branches(bb["anyOf"], u);
      if (!c) return unsupported("json schema: allOf at '{}' has conflicting 'if' values", ptr);
      bb["anyOf"] = *c;
    } else {
      bb["anyOf"] = u;
    }
  }
  const Json& b_ref = bb;
  // `items` means "after prefixItems" only next to its own prefixItems.
  if ((a.contains("prefixItems") && b_ref.contains("items")) ||
      (b_ref.contains("prefixItems") && a.contains("items")) ||
      (a.contains("items") && a["items"].is_array() && b_ref.contains("additionalItems")) ||
      (b_ref.contains("items") && b_ref["items"].is_array() && a.contains("additionalItems")))
    return unsupported("json schema: allOf at '{}' splits prefixItems and items across branches",
                       ptr);
  for (const auto& [k, v] : b_ref.items()) {
    if (!a.contains(k)) {
      a[k] = v;
      continue;
    }
    DI_ASSIGN_OR_RETURN(bool satisfiable, merge_keyword(a, b_ref, k, v, ptr));
    if (!satisfiable) return Json(false);
  }
  return a;
}

// A name the other side declares is governed here by additionalProperties: declare it with
// that schema (the same language), so the per-property conjunction is exact.
Status SchemaMerger::merge_declared_names(Json* const sides[2], const std::string& ptr) {
  for (int side = 0; side < 2; ++side) {
    Json& x = *sides[side];
    const Json& y = *sides[1 - side];
    if (!y.contains("properties") || subset_keys(y["properties"], x)) continue;
    if (!x.contains("additionalProperties")) continue;
    // A name x's patterns match is not governed by x's additionalProperties; the patterns
    // still apply to it once declared, so it is declared with `true`.
    std::vector<CodePointDfa> patterns;
    if (x.contains("patternProperties")) {
      if (!x["patternProperties"].is_object())
        return invalid_argument("json schema: patternProperties at '{}' is not an object", ptr);
      for (const auto& [pk, pv] : x["patternProperties"].items()) {
        auto d = dfa_from_pattern(pk, /*search=*/true, patterns_);
        if (!d.is_ok())
          return unsupported(
              "json schema: allOf at '{}' combines patternProperties with other "
              "properties ({})",
              ptr, d.status().message());
        patterns.push_back(std::move(*d));
      }
    }
    if (!x.contains("properties") || !x["properties"].is_object()) x["properties"] = Json::object();
    for (const auto& [k, v] : y["properties"].items()) {
      if (x["properties"].contains(k)) continue;
      bool matched = false;
      for (const auto& d : patterns) matched = matched || dfa_matches(d, k);
      x["properties"][k] = matched ? Json(true) : x["additionalProperties"];
    }
  }
  return Status::ok();
}

// patternProperties on one side exempt the names they match from the other side's
// additionalProperties only there: merged, they would exempt them on both sides. Such a
// side's additionalProperties is rewritten first as the pattern property it is: the names
// it neither declares nor matches by a pattern (so the merge then only unions patterns).
Status SchemaMerger::merge_pattern_clash(Json* const sides[2], const std::string& ptr) {
  bool clash = false;
  for (int side = 0; side < 2; ++side) {
    const Json& x = *sides[side];
    const Json& y = *sides[1 - side];
    if (!y.contains("patternProperties") || !x.contains("additionalProperties") ||
        is_trivial(x["additionalProperties"]))
      continue;
    if (!y["patternProperties"].is_object()) continue;
    for (const auto& [pk, pv] : y["patternProperties"].items())
      if (!x.contains("patternProperties") || !x["patternProperties"].is_object() ||
          !x["patternProperties"].contains(pk))
        clash = true;
  }
  if (clash)
    for (Json* x : {sides[0], sides[1]}) {
      if (!x->contains("additionalProperties") || is_trivial((*x)["additionalProperties"]))
        continue;
      auto p = undeclared_unmatched_pattern(*x);
      if (!p)
        return unsupported(
            "json schema: allOf at '{}' combines patternProperties with another "
            "branch's additionalProperties (a pattern or name does not fit the "
            "rewrite as a pattern property)",
            ptr);
      if (!x->contains("patternProperties")) (*x)["patternProperties"] = Json::object();
      if ((*x)["patternProperties"].contains(*p))
        (*x)["patternProperties"][*p] = Json{
            {"allOf", Json::array({(*x)["patternProperties"][*p], (*x)["additionalProperties"]})}};
      else
        (*x)["patternProperties"][*p] = (*x)["additionalProperties"];
      x->erase("additionalProperties");
    }
  return Status::ok();
}

// Keyword k of a (a value other than v) conjoined with b's value v, in place. False when no
// instance can satisfy both (the merged schema is `false`).
Result<bool> SchemaMerger::merge_keyword(Json& a, const Json& b_ref, const std::string& k, const Json& v,
                                         const std::string& ptr) {
  Json& cur = a[k];
  if (cur == v || kAnnotations.count(k) || !kKeywords.count(k)) return true;
  if (k == "properties" && cur.is_object() && v.is_object()) {
    for (const auto& [pk, pv] : v.items())
      if (!cur.contains(pk) || cur[pk] == pv)
        cur[pk] = pv;
      else if (pv == Json(false) || cur[pk] == Json(false))
        cur[pk] = false;
      else
        cur[pk] = Json{{"allOf", Json::array({cur[pk], pv})}};
  } else if (k == "required" && cur.is_array() && v.is_array()) {
    for (const auto& r : v)
      if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
  } else if (k == "type") {
    auto names = [](const Json& t) {
      std::set<std::string> out;
      if (t.is_string())
        out.insert(t.get<std::string>());
      else if (t.is_array())
        for (const auto& x : t)
          if (x.is_string()) out.insert(x.get<std::string>());
      return out;
    };
    auto x = names(cur), y = names(v);
    Json both = Json::array();
    for (const auto& t : x) {
      if (y.count(t))
        both.push_back(t);
      else if (t == "integer" && y.count("number"))
        both.push_back("integer");
      else if (t == "number" && y.count("integer"))
        both.push_back("integer");
    }
    if (both.empty()) return false;
    cur = both;
  } else if ((k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" ||
              k == "minProperties") &&
             cur.is_number() && v.is_number()) {
    if (v > cur) cur = v;
  } else if ((k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" ||
              k == "maxProperties") &&
             cur.is_number() && v.is_number()) {
    if (v < cur) cur = v;
  } else if (k == "items" || k == "additionalProperties") {
    cur = Json{{"allOf", Json::array({cur, v})}};
  } else if (k == "enum" && cur.is_array() && v.is_array()) {
    Json both = Json::array();
    for (const auto& x : cur)
      if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
    cur = both;
  } else if (k == "const") {
    return false;
  } else if (k == "pattern" && cur.is_string() && v.is_string()) {
    auto both = pattern_conjunction(cur, v, conjunctions_);
    if (!both)
      return unsupported("json schema: allOf at '{}' has conflicting 'pattern' values", ptr);
    cur = *both;
  } else if (k == "multipleOf" && cur.is_number() && v.is_number() &&
             cur.get<double>() == std::floor(cur.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>()) && cur.get<double>() >= 1 &&
             v.get<double>() >= 1 && cur.get<double>() < 1e9 && v.get<double>() < 1e9) {
    // Multiples of both integers a and b (integers themselves) are the multiples of lcm.
    cur = std::lcm(cur.get<int64_t>(), v.get<int64_t>());
  } else if (k == "multipleOf" && cur.is_number() && v.is_number() &&
             decimal_fraction(cur.get<double>()) && decimal_fraction(v.get<double>()) &&
             rational_lcm(*decimal_fraction(cur.get<double>()),
                          *decimal_fraction(v.get<double>()))) {
    // Short decimals p/q: the common multiples of p1/q1 and p2/q2 (lowest terms) are the
    // multiples of lcm(p1, p2) / gcd(q1, q2); an integer when the denominators are coprime.
    auto [p, q] =
        *rational_lcm(*decimal_fraction(cur.get<double>()), *decimal_fraction(v.get<double>()));
    if (q == 1)
      cur = p;
    else
      cur = static_cast<double>(p) / static_cast<double>(q);
  } else if ((k == "anyOf" || k == "oneOf") && cross_branches(cur, v)) {
    cur = *cross_branches(cur, v);
  } else if (k == "contains" && !a.contains("minContains") && !a.contains("maxContains") &&
             !b_ref.contains("minContains") && !b_ref.contains("maxContains")) {
    // contains X and contains Y (maybe met by different items) as the list [X, Y]: a value
    // no schema has, which gen_array and the validator read as that conjunction.
    Json all = cur.is_array() ? cur : Json::array({cur});
    for (const auto& x : v.is_array() ? v : Json::array({v}))
      if (std::find(all.begin(), all.end(), x) == all.end()) all.push_back(x);
    cur = all;
  } else if (k == "not") {
    // not X and not Y == not (X or Y); gen_not takes the union apart again.
    cur = Json{{"anyOf", Json::array({cur, v})}};
  } else if (k == "patternProperties" && cur.is_object() && v.is_object()) {
    for (const auto& [pk, pv] : v.items())
      if (!cur.contains(pk) || cur[pk] == pv)
        cur[pk] = pv;
      else
        cur[pk] = Json{{"allOf", Json::array({cur[pk], pv})}};
  } else {
    return unsupported("json schema: allOf at '{}' has conflicting '{}' values", ptr, k);
  }
  return true;
}

}  // namespace deepinfer::structured
