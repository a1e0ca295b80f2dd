// The oneOf disjointness test of SchemaMerger (see merge.h): whether no instance
// can match two schemas, read off types, const/enum values and required-vs-forbidden names.
#include <set>
#include <string>

#include "deepinfer/structured/json_schema/merge.h"

namespace deepinfer::structured {
namespace {
using Json = nlohmann::ordered_json;

// Bit per JSON type; integer folds into number.
int type_bits(const Json& v) {
  if (v.is_null()) return 1;
  if (v.is_boolean()) return 2;
  if (v.is_object()) return 4;
  if (v.is_array()) return 8;
  if (v.is_string()) return 16;
  return 32;
}
int type_name_bits(const std::string& t) {
  if (t == "null") return 1;
  if (t == "boolean") return 2;
  if (t == "object") return 4;
  if (t == "array") return 8;
  if (t == "string") return 16;
  if (t == "number" || t == "integer") return 32;
  return 63;
}
int schema_types(const Json& s) {
  if (s.is_boolean()) return s.get<bool>() ? 63 : 0;
  if (!s.is_object()) return 63;
  int bits = 63;
  if (s.contains("type")) {
    const Json& t = s["type"];
    int tb = 0;
    if (t.is_string()) tb = type_name_bits(t.get<std::string>());
    else if (t.is_array())
      for (const auto& x : t) tb |= x.is_string() ? type_name_bits(x.get<std::string>()) : 63;
    else tb = 63;
    bits &= tb;
  }
  if (s.contains("const")) bits &= type_bits(s["const"]);
  if (s.contains("enum") && s["enum"].is_array()) {
    int eb = 0;
    for (const auto& x : s["enum"]) eb |= type_bits(x);
    bits &= eb;
  }
  // Union branches widen the set.
  for (const char* kw : {"anyOf", "oneOf"})
    if (s.contains(kw) && s[kw].is_array()) {
      int ub = 0;
      for (const auto& x : s[kw]) ub |= schema_types(x);
      bits &= ub;
    }
  return bits;
}
// The finite value set a schema allows, if it pins one down with const/enum.
std::optional<std::vector<Json>> values_of(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array())
    return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  return std::nullopt;
}
bool disjoint_values(const std::vector<Json>& a, const std::vector<Json>& b) {
  for (const auto& x : a)
    for (const auto& y : b)
      if (x == y) return false;
  return true;
}
bool has_required(const Json& s, const std::string& k) {
  if (!s.contains("required") || !s["required"].is_array()) return false;
  for (const auto& r : s["required"]) if (r == k) return true;
  return false;
}
// `a` requires a property that `b` forbids (b: additionalProperties false, no pattern
// properties, the name not declared, or declared with the schema false).
bool requires_forbidden(const Json& a, const Json& b) {
  if (!a.contains("required") || !a["required"].is_array()) return false;
  if (!b.contains("additionalProperties") || b["additionalProperties"] != false) return false;
  if (b.contains("patternProperties") || b.contains("allOf") || b.contains("anyOf") ||
      b.contains("oneOf") || b.contains("$ref"))
    return false;
  const Json* props = b.contains("properties") && b["properties"].is_object() ? &b["properties"] : nullptr;
  for (const auto& r : a["required"]) {
    if (!r.is_string()) continue;
    const std::string k = r.get<std::string>();
    if (!props || !props->contains(k) || (*props)[k] == false) return true;
  }
  return false;
}

bool disjoint_pair(const Json& a, const Json& b) {
  if ((schema_types(a) & schema_types(b)) == 0) return true;
  auto va = values_of(a), vb = values_of(b);
  if (va && vb && disjoint_values(*va, *vb)) return true;
  if (schema_types(a) != 4 || schema_types(b) != 4) return false;
  // Objects told apart by a required property whose values cannot agree (disjoint const/enum
  // values or disjoint types).
  if (a.contains("properties") && b.contains("properties") && a["properties"].is_object() &&
      b["properties"].is_object()) {
    for (const auto& [k, pa] : a["properties"].items()) {
      if (!b["properties"].contains(k) || !has_required(a, k) || !has_required(b, k)) continue;
      const Json& pb = b["properties"][k];
      auto x = values_of(pa), y = values_of(pb);
      if (x && y && disjoint_values(*x, *y)) return true;
      if ((schema_types(pa) & schema_types(pb)) == 0) return true;
    }
  }
  // ... or by a property one requires and the other's closed layout cannot hold.
  return requires_forbidden(a, b) || requires_forbidden(b, a);
}
}  // namespace

// anyOf/oneOf branches with $ref replaced by their targets (a few levels deep), so the types
// a union allows are seen through references; only for the disjointness test, which reads
// types and values at the top and types in union branches. Unresolvable ones stay (any type).
Json SchemaMerger::inline_union_refs(const Json& s, int depth) const {
  if (!s.is_object() || depth > 4) return s;
  Json out = s;
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!out.contains(kw) || !out[kw].is_array()) continue;
    for (auto& b : out[kw]) {
      // A branch with $ref allows at most the types its target allows (siblings only narrow
      // it), so the target stands in for it here.
      bool ref = b.is_object() && b.contains("$ref") && b["$ref"].is_string();
      if (!ref) {
        b = inline_union_refs(b, depth + 1);
        continue;
      }
      auto target = resolve_(b["$ref"].get<std::string>(), "");
      if (target.is_ok() && *target) b = inline_union_refs(**target, depth + 1);
    }
  }
  return out;
}

bool SchemaMerger::pairwise_disjoint(const std::vector<Json>& schemas) const {
  std::vector<Json> seen;
  for (const auto& s : schemas) seen.push_back(inline_union_refs(s, 0));
  for (size_t i = 0; i < seen.size(); ++i)
    for (size_t j = i + 1; j < seen.size(); ++j)
      if (!disjoint_pair(seen[i], seen[j])) return false;
  return true;
}

}  // namespace deepinfer::structured
