// oneOf whose branches may overlap, over objects: oneOf[A, B] == (A and not B) or (B and not A).
// "not B" is a disjunction of reasons an object fails B; each reason we can express as a plain
// object schema (a name B requires is absent, a property present with a value B rejects, a name
// B's closed layout cannot hold is present) gives one case. Using only some of the reasons
// under-approximates "not B", so every generated instance still matches exactly one branch.
#include "deepinfer/structured/json_schema/schema_compiler.h"
#include "deepinfer/structured/json_schema/merge.h"
#include "deepinfer/structured/json_schema/validate.h"

namespace deepinfer::structured::detail {
namespace {

constexpr size_t kMaxCasesPerBranch = 64;

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

bool object_capable(const Json& m) {
  if (!m.is_object()) return m.is_boolean() && m.get<bool>();
  return has(declared_types(m), "object");
}

bool value_of_type(const Json& v, const std::vector<std::string>& types) {
  return std::any_of(types.begin(), types.end(), [&](const std::string& t) { return value_has_type(v, t); });
}

// A schema for the values of V that certainly fail S, or nullopt when we cannot write one.
std::optional<Json> values_failing(const Json& v, const Json& s) {
  if (s.is_boolean()) return s.get<bool>() ? std::nullopt : std::optional<Json>(v);
  if (!s.is_object() || (v.is_boolean() && !v.get<bool>())) return std::nullopt;
  Json base = v.is_boolean() ? Json::object() : v;
  // A value list inside an allOf the merge kept (two property schemas merged): its values
  // are the candidates, and the rest of V stays in the result next to the narrowed enum.
  const Json* listed = nullptr;
  if (base.contains("enum") || base.contains("const")) {
    listed = &base;
  } else if (base.contains("allOf") && base["allOf"].is_array()) {
    for (const auto& b : base["allOf"])
      if (b.is_object() && (b.contains("enum") || b.contains("const"))) {
        listed = &b;
        break;
      }
  }
  if (listed) {
    Json values = listed->contains("const") ? Json::array({(*listed)["const"]}) : (*listed)["enum"];
    if (!values.is_array()) return std::nullopt;
    Json out = Json::array();
    // A value fails S when it fails S's own const/enum/type or those of a conjunct the merge
    // kept in S's allOf (two property schemas merged): failing one part fails the whole.
    auto fails_part = [](const Json& x, const Json& t) {
      bool fails = false;
      if (t.contains("const")) fails = x != t["const"];
      if (t.contains("enum") && t["enum"].is_array())
        fails = fails || std::find(t["enum"].begin(), t["enum"].end(), x) == t["enum"].end();
      if (t.contains("type")) fails = fails || !value_of_type(x, declared_types(t));
      return fails;
    };
    for (const auto& x : values) {
      bool fails = fails_part(x, s);
      if (s.contains("allOf") && s["allOf"].is_array())
        for (const auto& part : s["allOf"])
          if (part.is_object()) fails = fails || fails_part(x, part);
      if (fails) out.push_back(x);
    }
    if (out.empty()) return std::nullopt;
    base.erase("const");
    base["enum"] = out;
    return base;
  }
  if (s.contains("enum") || s.contains("const") || !s.contains("type")) return std::nullopt;
  // Types S does not allow; "number but not integer" has no schema, so it is left out.
  std::vector<std::string> st = declared_types(s), keep;
  for (const auto& t : declared_types(base)) {
    if (has(st, t) || (t == "integer" && has(st, "number"))) continue;
    if (t == "number" && has(st, "integer")) continue;
    keep.push_back(t);
  }
  if (keep.empty()) return std::nullopt;
  base["type"] = keep;
  return base;
}

bool array_capable(const Json& m) {
  if (!m.is_object()) return m.is_boolean() && m.get<bool>();
  return has(declared_types(m), "array");
}

bool string_capable(const Json& m) {
  if (!m.is_object()) return m.is_boolean() && m.get<bool>();
  return has(declared_types(m), "string");
}

}  // namespace

// The language a schema gives strings, as an automaton; nullopt when keywords we cannot
// write as one apply to strings. `type` is ignored at the top (callers test it); inside
// not/anyOf/allOf/oneOf/$ref a subschema that does not allow strings has the empty language,
// and the combinators are the automata's boolean combinations (exact).
Result<std::optional<CodePointDfa>> SchemaCompiler::string_language(const Json& m) {
  SchemaMerger merger = new_merger();
  std::function<Result<std::optional<CodePointDfa>>(const Json&, int)> of =
      [&](const Json& m, int depth) -> Result<std::optional<CodePointDfa>> {
    static const std::set<std::string> kOpaque = {"if", "then", "else", "$dynamicRef",
                                                  "$recursiveRef"};
    static const std::set<std::string> kCombinators = {"not", "anyOf", "oneOf", "allOf", "$ref"};
    constexpr int kMaxDepth = 8;
    if (m.is_boolean()) {
      DI_ASSIGN_OR_RETURN(CodePointDfa d,
                          m.get<bool>() ? dfa_from_pattern("", true, &patterns_) : dfa_of_strings({}));
      return std::optional<CodePointDfa>(std::move(d));
    }
    if (!m.is_object()) return std::optional<CodePointDfa>();
    if (depth > 0 && !string_capable(m))
      return std::optional<CodePointDfa>(*dfa_of_strings({}));
    for (const auto& [k, v] : m.items())
      if (kOpaque.count(k)) return std::optional<CodePointDfa>();
    bool combined = std::any_of(m.items().begin(), m.items().end(),
                                [](const auto& kv) { return kCombinators.count(kv.key()) > 0; });
    if (combined) {
      if (depth >= kMaxDepth) return std::optional<CodePointDfa>();
      if (m.contains("$ref") && !has_validation_siblings(m)) {
        if (!m["$ref"].is_string()) return std::optional<CodePointDfa>();
        auto target = resolve(m["$ref"].get<std::string>(), "");
        if (!target.is_ok() || !*target) return std::optional<CodePointDfa>();
        return of(**target, depth + 1);
      }
      Json plain = m;
      if (m.contains("$ref") || m.contains("allOf")) {
        // References with siblings and conjunctions are folded in first (the merge refuses
        // what it cannot fold exactly); an allOf it keeps is intersected below.
        auto flat = merger.flatten(m, "");
        if (!flat.is_ok()) return std::optional<CodePointDfa>();
        if (!flat->is_object() || flat->contains("$ref")) return of(*flat, depth + 1);
        plain = *flat;
      }
      std::vector<CodePointDfa> parts;  // the plain keywords' language, then each combinator's
      Json base = plain;
      for (const auto& k : kCombinators) base.erase(k);
      DI_ASSIGN_OR_RETURN(auto own, of(base, depth + 1));
      if (!own) return std::optional<CodePointDfa>();
      parts.push_back(std::move(*own));
      for (const char* k : {"not", "anyOf", "oneOf", "allOf"}) {
        if (!plain.contains(k)) continue;
        const Json& v = plain[k];
        std::vector<CodePointDfa> sub;
        if (std::string(k) == "not") {
          DI_ASSIGN_OR_RETURN(auto x, of(v, depth + 1));
          if (!x) return std::optional<CodePointDfa>();
          sub.push_back(std::move(*x));
        } else {
          if (!v.is_array() || v.empty()) return std::optional<CodePointDfa>();
          for (const auto& b : v) {
            DI_ASSIGN_OR_RETURN(auto x, of(b, depth + 1));
            if (!x) return std::optional<CodePointDfa>();
            sub.push_back(std::move(*x));
          }
        }
        std::vector<const CodePointDfa*> ptrs;
        for (const auto& d : sub) ptrs.push_back(&d);
        std::string kw = k;
        DI_ASSIGN_OR_RETURN(CodePointDfa joined,
                            dfa_product(ptrs, [kw](const std::vector<bool>& a) {
                              size_t n = std::count(a.begin(), a.end(), true);
                              if (kw == "not") return n == 0;
                              if (kw == "anyOf") return n > 0;
                              if (kw == "allOf") return n == a.size();
                              return n == 1;  // oneOf
                            }));
        parts.push_back(std::move(joined));
      }
      std::vector<const CodePointDfa*> ptrs;
      for (const auto& d : parts) ptrs.push_back(&d);
      DI_ASSIGN_OR_RETURN(CodePointDfa all, dfa_product(ptrs, [](const std::vector<bool>& a) {
                            return std::find(a.begin(), a.end(), false) == a.end();
                          }));
      return std::optional<CodePointDfa>(std::move(all));
    }
    std::optional<std::string> pattern, format;
    if (m.contains("pattern")) {
      if (!m["pattern"].is_string()) return std::optional<CodePointDfa>();
      pattern = m["pattern"].get<std::string>();
    }
    if (o_.enforce_formats && m.contains("format") && m["format"].is_string()) {
      std::string f = m["format"].get<std::string>();
      format = format_regex(f);
      if (!format && spec_defined_format(f)) return std::optional<CodePointDfa>();
    }
    auto count = [&](const char* k, int64_t dflt) {
      return m.contains(k) && m[k].is_number() ? static_cast<int64_t>(m[k].get<double>()) : dflt;
    };
    int64_t lo = std::max<int64_t>(0, count("minLength", 0)), hi = count("maxLength", -1);
    if (hi >= 0 && hi < lo) return std::optional<CodePointDfa>(*dfa_of_strings({}));
    Result<CodePointDfa> lang = CodePointDfa{};
    if (pattern || format) {
      lang = string_automaton(pattern, format, lo, hi, &patterns_);
    } else {
      DI_ASSIGN_OR_RETURN(CodePointDfa any, dfa_from_pattern("", true, &patterns_));
      lang = lo > 0 || hi >= 0 ? dfa_with_length(any, lo, hi) : Result<CodePointDfa>(std::move(any));
    }
    if (!lang.is_ok()) return lang.status();
    if (m.contains("enum") || m.contains("const")) {
      Json values = m.contains("const") ? Json::array({m["const"]}) : m["enum"];
      std::vector<std::string> strings;
      if (values.is_array())
        for (const auto& v : values)
          if (v.is_string()) strings.push_back(v.get<std::string>());
      DI_ASSIGN_OR_RETURN(CodePointDfa listed, dfa_of_strings(strings));
      DI_ASSIGN_OR_RETURN(*lang, dfa_product({&*lang, &listed}, [](const std::vector<bool>& a) {
        return a[0] && a[1];
      }));
    }
    return std::optional<CodePointDfa>(std::move(*lang));
  };
  return of(m, 0);
}

Result<std::optional<Element>> SchemaCompiler::one_of_strings(const std::vector<Json>& merged,
                                                              size_t i,
                                                              const std::vector<size_t>& others) {
  if (!string_capable(merged[i])) return std::optional<Element>();
  std::vector<CodePointDfa> langs;
  DI_ASSIGN_OR_RETURN(auto own, string_language(merged[i]));
  if (!own) return std::optional<Element>();
  langs.push_back(std::move(*own));
  for (size_t j : others) {
    if (!string_capable(merged[j])) continue;  // a string never matches it
    DI_ASSIGN_OR_RETURN(auto other, string_language(merged[j]));
    if (!other) return std::optional<Element>();
    langs.push_back(std::move(*other));
  }
  std::vector<const CodePointDfa*> parts;
  for (const auto& l : langs) parts.push_back(&l);
  DI_ASSIGN_OR_RETURN(CodePointDfa only, dfa_product(parts, [](const std::vector<bool>& a) {
                        for (size_t k = 1; k < a.size(); ++k)
                          if (a[k]) return false;
                        return a[0];
                      }));
  if (dfa_is_empty(only)) return std::optional<Element>(never());
  return std::optional<Element>(rule(
      "one_of_string", {cat({lit("\""), {dfa_to_rule(b_, only, true, "str_dfa")}, lit("\"")})}));
}

Result<std::optional<std::vector<Json>>> SchemaCompiler::one_of_cases(
    const std::vector<Json>& merged, size_t i, const std::vector<size_t>& others) {
  if (!object_capable(merged[i])) return std::optional<std::vector<Json>>();
  Json start = merged[i].is_object() ? merged[i] : Json::object();
  start["type"] = "object";  // other types would match every overlapping branch alike
  std::vector<Json> cases = {start};
  auto addl_of = [&](const Json& c) -> Json {
    if (c.contains("additionalProperties")) return c["additionalProperties"];
    return Json(!o_.strict_properties);
  };
  auto required_of = [](const Json& c) {
    std::set<std::string> r;
    if (c.contains("required") && c["required"].is_array())
      for (const auto& x : c["required"])
        if (x.is_string()) r.insert(x.get<std::string>());
    return r;
  };
  // Whether case c can hold a property named p, and the schema its value then takes (unknown
  // when pattern properties may apply).
  enum class Hold { kNo, kYes, kUnknown };
  auto holds = [&](const Json& c, const std::string& p) -> std::pair<Hold, Json> {
    if (c.contains("properties") && c["properties"].contains(p)) {
      const Json& v = c["properties"][p];
      if (v.is_boolean() && !v.get<bool>()) return {Hold::kNo, v};
      if (c.contains("patternProperties")) return {Hold::kUnknown, v};
      return {Hold::kYes, v};
    }
    if (c.contains("patternProperties")) return {Hold::kUnknown, Json()};
    Json a = addl_of(c);
    if (a.is_boolean() && !a.get<bool>()) return {Hold::kNo, a};
    return {Hold::kYes, a};
  };
  for (size_t j : others) {
    if (!object_capable(merged[j])) continue;  // an object never matches it
    if (!merged[j].is_object())
      return std::optional<std::vector<Json>>(std::vector<Json>{});  // `true`
    const Json& b = merged[j];
    std::vector<Json> next;
    for (const Json& c : cases) {
      std::set<std::string> req = required_of(c);
      std::vector<Json> reasons;
      bool already = false;
      auto require = [&](Json x, const std::string& p, const Json& v) {
        x["properties"][p] = v;
        if (!x.contains("required")) x["required"] = Json::array();
        x["required"].push_back(p);
        reasons.push_back(std::move(x));
      };
      for (const auto& r : required_of(b)) {  // a name B requires is absent
        if (req.count(r)) continue;
        if (holds(c, r).first == Hold::kNo) {
          already = true;
          break;
        }
        Json x = c;
        x["properties"][r] = false;
        reasons.push_back(std::move(x));
      }
      if (!already && b.contains("properties") && b["properties"].is_object())
        for (const auto& [p, sp] : b["properties"].items()) {  // a value B rejects
          auto [hold, v] = holds(c, p);
          if (hold != Hold::kYes) continue;
          auto bad = values_failing(v, sp);
          if (!bad) continue;
          if (req.count(p) && *bad == v) {
            already = true;
            break;
          }
          require(c, p, *bad);
        }
      Json ba = b.contains("additionalProperties") ? b["additionalProperties"]
                                                   : Json(!o_.strict_properties);
      if (!already && ba.is_boolean() && !ba.get<bool>() && !b.contains("patternProperties") &&
          c.contains("properties"))
        for (const auto& [p, v] : c["properties"].items()) {  // a name B cannot hold
          if ((v.is_boolean() && !v.get<bool>()) ||
              (b.contains("properties") && b["properties"].contains(p)))
            continue;
          if (req.count(p)) {
            already = true;
            break;
          }
          require(c, p, v);
        }
      if (already)
        next.push_back(c);
      else
        for (auto& x : reasons) next.push_back(std::move(x));
      if (next.size() > kMaxCasesPerBranch) break;  // fewer cases: fewer instances, still exact
    }
    // Dedupe; a case whose own required names are forbidden is empty and dropped.
    std::set<std::string> seen;
    cases.clear();
    for (auto& x : next) {
      bool empty = false;
      for (const auto& r : required_of(x))
        if (x.contains("properties") && x["properties"].contains(r) &&
            x["properties"][r] == Json(false))
          empty = true;
      if (!empty && seen.insert(x.dump()).second) cases.push_back(std::move(x));
    }
    if (cases.size() > kMaxCasesPerBranch) cases.resize(kMaxCasesPerBranch);
  }
  return std::optional<std::vector<Json>>(std::move(cases));
}

// oneOf over arrays, e.g. [{items: number}, {items: {type: array}}] or item enums with no
// common value: the empty array may match several branches, but a non-empty array of branch
// i has a first item that fails every other branch's `items`, so it matches branch i only.
// Branch i's other types are left out (a sound subset).
std::optional<Json> SchemaCompiler::one_of_arrays(const std::vector<Json>& merged, size_t i,
                                                  const std::vector<size_t>& others) {
  const Json& own = merged[i];
  if (!own.is_object() || !array_capable(own) || !own.contains("items") ||
      own.contains("prefixItems") || !(own["items"].is_object() || own["items"].is_boolean()))
    return std::nullopt;
  SchemaMerger merger = new_merger();
  auto flat_items = [&](const Json& m) -> std::optional<Json> {
    auto f = merger.flatten(m["items"], "/items");
    if (!f.is_ok()) return std::nullopt;
    return *f;
  };
  auto mine = flat_items(own);
  if (!mine) return std::nullopt;
  for (size_t j : others) {
    const Json& b = merged[j];
    if (!array_capable(b)) continue;  // an array never matches it
    if (!b.is_object() || !b.contains("items") || b.contains("prefixItems") ||
        !(b["items"].is_object() || b["items"].is_boolean()))
      return std::nullopt;
    auto theirs = flat_items(b);
    if (!theirs || !merger.pairwise_disjoint({*mine, *theirs})) return std::nullopt;
  }
  Json out = own;
  out["type"] = "array";
  int64_t lo = own.contains("minItems") && own["minItems"].is_number()
                   ? static_cast<int64_t>(std::ceil(own["minItems"].get<double>()))
                   : 0;
  out["minItems"] = std::max<int64_t>(lo, 1);
  return out;
}

}  // namespace deepinfer::structured::detail
