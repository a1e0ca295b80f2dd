// dependentRequired / dependentSchemas / dependencies: which names a present property
// brings along. Only forms that reduce to "these names must be present too" (arrays, schemas
// that only list `required`) or "this name may not appear" (false) are accepted; the object
// lowering then emits the trigger only together with its dependents.
#include "deepinfer/engine/grammar/json_schema_lowering.h"

namespace deepinfer::engine::grammar::detail {
namespace {

bool only_annotations_besides(const Json& s, const char* keep) {
  static const std::set<std::string> kNote = {"title",   "description", "$comment", "examples",
                                              "default", "deprecated",  "readOnly", "writeOnly"};
  for (const auto& [k, v] : s.items())
    if (k != keep && !kNote.count(k)) return false;
  return true;
}

}  // namespace

Result<std::optional<Element>> SchemaCompiler::dependent_schema_cases(const Json& s,
                                                                      const std::string& ptr) {
  constexpr size_t kMaxDependentSchemas = 3;  // 2^k cases
  // Schema-valued dependencies beyond required names: "if name is present, the object also
  // matches d" == (name absent) or (name present and d), exact as a union of cases.
  std::vector<std::tuple<std::string, std::string, Json>> split;  // keyword, name, schema
  Json rest = s;
  for (const char* kw : {"dependentSchemas", "dependencies"}) {
    if (!s.contains(kw) || !s[kw].is_object()) continue;
    for (const auto& [name, d] : s[kw].items())
      if (d.is_object() && !only_annotations_besides(d, "required")) {
        split.emplace_back(kw, name, d);
        rest[kw].erase(name);
      }
    if (rest[kw].empty()) rest.erase(kw);
  }
  if (split.empty()) return std::optional<Element>();
  if (split.size() > kMaxDependentSchemas)
    return unsupported("json schema: more than {} schema-valued dependencies at '{}'",
                       kMaxDependentSchemas, ptr);
  std::vector<Sequence> alts;
  for (uint32_t present = 0; present < (1u << split.size()); ++present) {
    Json c = rest;
    Json all = Json::array();
    for (size_t i = 0; i < split.size(); ++i) {
      const auto& [kw, name, d] = split[i];
      if ((present >> i) & 1) {
        all.push_back(Json{{"required", Json::array({name})}});
        all.push_back(d);
      } else {
        if (!c.contains("properties") || !c["properties"].is_object())
          c["properties"] = Json::object();
        c["properties"][name] = false;  // absent
      }
    }
    if (!all.empty()) {
      all.insert(all.begin(), c);
      c = Json{{"allOf", all}};
    }
    DI_ASSIGN_OR_RETURN(Element e, gen(c, ptr));
    alts.push_back({e});
  }
  return std::optional<Element>(rule("dependent_cases", std::move(alts)));
}

Result<std::map<std::string, std::optional<std::vector<std::string>>>> SchemaCompiler::dependencies(
    const Json& s, const std::string& ptr) {
  std::map<std::string, std::optional<std::vector<std::string>>> out;
  for (const char* kw : {"dependentRequired", "dependentSchemas", "dependencies"}) {
    if (!s.contains(kw)) continue;
    if (!s[kw].is_object())
      return invalid_argument("json schema: '{}' at '{}/{}' is not an object", kw, ptr, kw);
    for (const auto& [name, v] : s[kw].items()) {
      std::string where = fmt::format("{}/{}/{}", ptr, kw, name);
      const Json* names = nullptr;
      bool array_ok = std::string(kw) != "dependentSchemas";
      bool schema_ok = std::string(kw) != "dependentRequired";
      if (v.is_array() && array_ok) {
        names = &v;
      } else if (v.is_boolean() && schema_ok) {
        if (!v.get<bool>())
          out[name] = std::nullopt;
        else
          out.try_emplace(name, std::vector<std::string>{});
        continue;
      } else if (v.is_object() && schema_ok && only_annotations_besides(v, "required")) {
        if (!v.contains("required")) {
          out.try_emplace(name, std::vector<std::string>{});
          continue;
        }
        names = &v["required"];
      } else {
        return unsupported(
            "json schema: keyword '{}' at '{}' is supported only as a list of "
            "required names",
            kw, where);
      }
      if (!names->is_array())
        return invalid_argument("json schema: '{}' at '{}' is not a list of names", kw, where);
      auto [it, fresh] = out.try_emplace(name, std::vector<std::string>{});
      if (!it->second) continue;  // already forbidden
      for (const auto& n : *names) {
        if (!n.is_string())
          return invalid_argument("json schema: '{}' at '{}' lists a non-string", kw, where);
        it->second->push_back(n.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace deepinfer::engine::grammar::detail
