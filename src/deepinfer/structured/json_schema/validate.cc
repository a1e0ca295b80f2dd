// Single-instance JSON Schema validation with an "unknown" verdict (see validate.h).
#include "deepinfer/structured/json_schema/validate.h"

#include <cmath>
#include <set>

#include "deepinfer/structured/json_schema/schema_compiler.h"
#include "deepinfer/structured/json_schema/parts.h"

namespace deepinfer::structured {
namespace {

using Json = InstanceValidator::Json;

// Keywords whose meaning we do not implement here: any of them makes a verdict unknown.
const std::set<std::string> kOpaque = {"$dynamicRef", "$recursiveRef", "unevaluatedProperties",
                                       "unevaluatedItems"};

// All of the verdicts: invalid wins over unknown, unknown over valid.
struct All {
  Verdict v = Verdict::kValid;
  void add(Verdict x) {
    if (x == Verdict::kInvalid || v == Verdict::kInvalid)
      v = Verdict::kInvalid;
    else if (x == Verdict::kUnknown)
      v = Verdict::kUnknown;
  }
  bool invalid() const { return v == Verdict::kInvalid; }
};

bool is_integer_value(const Json& v) {
  return v.is_number_integer() || v.is_number_unsigned() ||
         (v.is_number_float() && std::isfinite(v.get<double>()) &&
          std::floor(v.get<double>()) == v.get<double>());
}


// JSON equality with 1 == 1.0, recursively.
bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, x] : a.items())
      if (!b.contains(k) || !json_equal(x, b[k])) return false;
    return true;
  }
  return a == b;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::vector<std::string> declared_types(const nlohmann::ordered_json& s) {
  if (!s.is_object() || !s.contains("type")) return {"null", "boolean", "object", "array", "string", "number"};
  std::vector<std::string> out;
  const auto& t = s["type"];
  if (t.is_string()) {
    out.push_back(t.get<std::string>());
  } else if (t.is_array()) {
    for (const auto& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  }
  return out;
}

bool value_has_type(const nlohmann::ordered_json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number() && is_integer_value(v);
  return false;
}

Verdict InstanceValidator::validate(const Json& schema, const Json& instance) {
  return check(schema, instance, 0);
}

Verdict InstanceValidator::matches(const std::string& pattern, const std::string& text,
                                   bool search) {
  auto key = std::make_pair(pattern, search);
  auto it = regex_cache_.find(key);
  if (it == regex_cache_.end()) {
    auto d = dfa_from_pattern(pattern, search, patterns_);
    it = regex_cache_
             .emplace(key, d.is_ok() ? std::optional<CodePointDfa>(std::move(*d)) : std::nullopt)
             .first;
  }
  if (!it->second) return Verdict::kUnknown;
  return dfa_matches(*it->second, text) ? Verdict::kValid : Verdict::kInvalid;
}

Verdict InstanceValidator::check(const Json& s, const Json& v, int depth) {
  if (depth > 64) return Verdict::kUnknown;
  if (s.is_boolean()) return s.get<bool>() ? Verdict::kValid : Verdict::kInvalid;
  if (!s.is_object()) return Verdict::kUnknown;
  All all;
  for (const auto& [k, x] : s.items())
    if (kOpaque.count(k)) return Verdict::kUnknown;
  if (s.contains("$ref")) {
    const Json& r = s["$ref"];
    if (!r.is_string() || r.get<std::string>().rfind("#", 0) != 0) return Verdict::kUnknown;
    std::string frag = r.get<std::string>().substr(1);
    if (frag.find('%') != std::string::npos || (!frag.empty() && frag[0] != '/'))
      return Verdict::kUnknown;
    try {
      all.add(check(root_.at(Json::json_pointer(frag)), v, depth + 1));
    } catch (const std::exception&) {
      return Verdict::kUnknown;
    }
  }
  if (s.contains("type")) {
    const Json& t = s["type"];
    bool ok = false;
    if (t.is_string())
      ok = value_has_type(v, t.get<std::string>());
    else if (t.is_array())
      for (const auto& x : t) ok = ok || (x.is_string() && value_has_type(v, x.get<std::string>()));
    else
      return Verdict::kUnknown;
    all.add(ok ? Verdict::kValid : Verdict::kInvalid);
  }
  if (s.contains("const")) all.add(json_equal(s["const"], v) ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) return Verdict::kUnknown;
    bool ok = false;
    for (const auto& x : s["enum"]) ok = ok || json_equal(x, v);
    all.add(ok ? Verdict::kValid : Verdict::kInvalid);
  }
  if (all.invalid()) return all.v;
  if (s.contains("not")) {
    Verdict n = check(s["not"], v, depth + 1);
    all.add(n == Verdict::kValid     ? Verdict::kInvalid
            : n == Verdict::kInvalid ? Verdict::kValid
                                     : Verdict::kUnknown);
  }
  if (s.contains("allOf")) {
    if (!s["allOf"].is_array()) return Verdict::kUnknown;
    for (const auto& x : s["allOf"]) all.add(check(x, v, depth + 1));
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      if (!s[kw].is_array()) return Verdict::kUnknown;
      int valid = 0, unknown = 0;
      for (const auto& x : s[kw]) {
        Verdict b = check(x, v, depth + 1);
        valid += b == Verdict::kValid;
        unknown += b == Verdict::kUnknown;
      }
      if (std::string(kw) == "anyOf")
        all.add(valid > 0 ? Verdict::kValid : unknown ? Verdict::kUnknown : Verdict::kInvalid);
      else
        all.add(valid > 1    ? Verdict::kInvalid
                : unknown    ? Verdict::kUnknown
                : valid == 1 ? Verdict::kValid
                             : Verdict::kInvalid);
    }
  }
  if (s.contains("if")) {
    Verdict c = check(s["if"], v, depth + 1);
    if (c == Verdict::kUnknown)
      all.add(c);
    else if (c == Verdict::kValid && s.contains("then"))
      all.add(check(s["then"], v, depth + 1));
    else if (c == Verdict::kInvalid && s.contains("else"))
      all.add(check(s["else"], v, depth + 1));
  }
  if (v.is_number()) all.add(check_number(s, v));
  if (v.is_string()) all.add(check_string(s, v));
  if (v.is_array()) all.add(check_array(s, v, depth));
  if (v.is_object()) all.add(check_object(s, v, depth));
  return all.v;
}

Verdict InstanceValidator::check_number(const Json& s, const Json& v) {
  const double x = v.get<double>();
  All all;
  auto bound = [&](const char* k, auto ok) {
    if (s.contains(k) && s[k].is_number())
      all.add(ok(s[k].get<double>()) ? Verdict::kValid : Verdict::kInvalid);
  };
  bool ex_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                s["exclusiveMinimum"].get<bool>();
  bool ex_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                s["exclusiveMaximum"].get<bool>();
  bound("minimum", [&](double m) { return ex_min ? x > m : x >= m; });
  bound("maximum", [&](double m) { return ex_max ? x < m : x <= m; });
  bound("exclusiveMinimum", [&](double m) { return x > m; });
  bound("exclusiveMaximum", [&](double m) { return x < m; });
  if (s.contains("multipleOf") && s["multipleOf"].is_number()) {
    const Json& m = s["multipleOf"];
    if (is_integer_value(v) && (m.is_number_integer() || m.is_number_unsigned()) &&
        std::abs(x) < 9e15) {
      int64_t a = static_cast<int64_t>(x), b = m.get<int64_t>();
      all.add(b != 0 && a % b == 0 ? Verdict::kValid : Verdict::kInvalid);
    } else {
      double q = x / m.get<double>();
      double r = std::abs(q - std::round(q));
      if (r < 1e-9)
        all.add(Verdict::kValid);
      else if (r > 1e-6)
        all.add(Verdict::kInvalid);
      else
        all.add(Verdict::kUnknown);  // too close to call in floating point
    }
  }
  return all.v;
}

Verdict InstanceValidator::check_string(const Json& s, const Json& v) {
  const std::string& x = v.get_ref<const std::string&>();
  All all;
  size_t n = code_points(x);
  if (s.contains("minLength") && s["minLength"].is_number())
    all.add(n >= s["minLength"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("maxLength") && s["maxLength"].is_number())
    all.add(n <= s["maxLength"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Verdict::kUnknown;
    all.add(matches(s["pattern"].get<std::string>(), x, true));
  }
  if (enforce_formats_ && s.contains("format") && s["format"].is_string()) {
    const std::string f = s["format"].get<std::string>();
    if (auto re = format_regex(f))
      all.add(matches(*re, x, false));
    else if (detail::spec_defined_format(f))
      all.add(Verdict::kUnknown);  // others are annotations
  }
  return all.v;
}

Verdict InstanceValidator::check_array(const Json& s, const Json& v, int depth) {
  All all;
  size_t n = v.size(), prefix = 0;
  if (s.contains("minItems") && s["minItems"].is_number())
    all.add(n >= s["minItems"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("maxItems") && s["maxItems"].is_number())
    all.add(n <= s["maxItems"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  const Json* tuple = s.contains("prefixItems")                        ? &s["prefixItems"]
                      : (s.contains("items") && s["items"].is_array()) ? &s["items"]
                                                                       : nullptr;
  if (tuple) {
    if (!tuple->is_array()) return Verdict::kUnknown;
    prefix = std::min(n, tuple->size());
    for (size_t i = 0; i < prefix; ++i) all.add(check((*tuple)[i], v[i], depth + 1));
  }
  const Json* rest = s.contains("prefixItems") ? (s.contains("items") ? &s["items"] : nullptr)
                     : tuple ? (s.contains("additionalItems") ? &s["additionalItems"] : nullptr)
                             : (s.contains("items") ? &s["items"] : nullptr);
  if (rest)
    for (size_t i = prefix; i < n; ++i) all.add(check(*rest, v[i], depth + 1));
  if (s.contains("uniqueItems") && s["uniqueItems"] == true)
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j)
        if (json_equal(v[i], v[j])) all.add(Verdict::kInvalid);
  if (s.contains("contains") && s["contains"].is_array()) {
    // A list (no schema's own value: what the allOf merge makes of two `contains`): each one
    // must be matched by some item.
    if (s.contains("minContains") || s.contains("maxContains")) return Verdict::kUnknown;
    for (const auto& c : s["contains"]) {
      size_t hits = 0, unknown = 0;
      for (const auto& x : v) {
        Verdict h = check(c, x, depth + 1);
        hits += h == Verdict::kValid;
        unknown += h == Verdict::kUnknown;
      }
      all.add(hits > 0 ? Verdict::kValid : unknown ? Verdict::kUnknown : Verdict::kInvalid);
    }
  } else if (s.contains("contains")) {
    size_t hits = 0, unknown = 0;
    for (const auto& x : v) {
      Verdict c = check(s["contains"], x, depth + 1);
      hits += c == Verdict::kValid;
      unknown += c == Verdict::kUnknown;
    }
    double lo = s.contains("minContains") && s["minContains"].is_number()
                    ? s["minContains"].get<double>()
                    : 1;
    double hi = s.contains("maxContains") && s["maxContains"].is_number()
                    ? s["maxContains"].get<double>()
                    : 1e18;
    if (unknown)
      all.add(Verdict::kUnknown);
    else
      all.add(hits >= lo && hits <= hi ? Verdict::kValid : Verdict::kInvalid);
  }
  return all.v;
}

Verdict InstanceValidator::check_object(const Json& s, const Json& v, int depth) {
  All all;
  if (s.contains("minProperties") && s["minProperties"].is_number())
    all.add(v.size() >= s["minProperties"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("maxProperties") && s["maxProperties"].is_number())
    all.add(v.size() <= s["maxProperties"].get<double>() ? Verdict::kValid : Verdict::kInvalid);
  if (s.contains("required") && s["required"].is_array())
    for (const auto& r : s["required"])
      if (r.is_string())
        all.add(v.contains(r.get<std::string>()) ? Verdict::kValid : Verdict::kInvalid);
  for (const auto& [name, x] : v.items()) {
    bool matched = false;
    if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(name)) {
      matched = true;
      all.add(check(s["properties"][name], x, depth + 1));
    }
    if (s.contains("patternProperties") && s["patternProperties"].is_object())
      for (const auto& [p, ps] : s["patternProperties"].items()) {
        Verdict m = matches(p, name, true);
        if (m == Verdict::kUnknown) return m;
        if (m == Verdict::kValid) {
          matched = true;
          all.add(check(ps, x, depth + 1));
        }
      }
    if (!matched && s.contains("additionalProperties"))
      all.add(check(s["additionalProperties"], x, depth + 1));
    if (s.contains("propertyNames")) all.add(check(s["propertyNames"], Json(name), depth + 1));
  }
  for (const char* kw : {"dependentRequired", "dependentSchemas", "dependencies"}) {
    if (!s.contains(kw) || !s[kw].is_object()) continue;
    for (const auto& [t, d] : s[kw].items()) {
      if (!v.contains(t)) continue;
      if (d.is_array()) {
        for (const auto& r : d)
          if (r.is_string())
            all.add(v.contains(r.get<std::string>()) ? Verdict::kValid : Verdict::kInvalid);
      } else {
        all.add(check(d, v, depth + 1));
      }
    }
  }
  return all.v;
}

}  // namespace deepinfer::structured
