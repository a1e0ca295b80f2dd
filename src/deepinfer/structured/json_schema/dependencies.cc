// dependentRequired / dependentSchemas / dependencies: which names a present property
// brings along. Forms that reduce to "these names must be present too" (arrays, schemas that
// only list `required`) or "this name may not appear" (false) go to the object lowering,
// which emits the trigger only together with its dependents; any other dependent schema makes
// one case per set of present trigger names (dependent_schema_cases).
#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured::detail {
namespace {

bool only_annotations_besides(const Json& s, const char* keep) {
  static const std::set<std::string> kNote = {"title",   "description", "$comment", "examples",
                                              "default", "deprecated",  "readOnly", "writeOnly"};
  for (const auto& [k, v] : s.items())
    if (k != keep && !kNote.count(k)) return false;
  return true;
}

// What a dependent schema says about an object that has exactly the names marked present in
// `known`: a formula over `required` lists (with not/anyOf/allOf/oneOf and type object).
// nullopt when it uses another keyword or a name outside `known`.
std::optional<bool> presence_value(const Json& f, const std::map<std::string, bool>& known,
                                   int depth = 0) {
  static const std::set<std::string> kNote = {"title",   "description", "$comment", "examples",
                                              "default", "deprecated",  "readOnly", "writeOnly"};
  if (f.is_boolean()) return f.get<bool>();
  if (!f.is_object() || depth > 16) return std::nullopt;
  bool value = true;
  for (const auto& [k, v] : f.items()) {
    if (kNote.count(k)) continue;
    if (k == "type") {
      bool object = v == "object" ||
                    (v.is_array() && std::find(v.begin(), v.end(), Json("object")) != v.end());
      if (!object) return std::nullopt;
    } else if (k == "required") {
      if (!v.is_array()) return std::nullopt;
      for (const auto& n : v) {
        if (!n.is_string()) return std::nullopt;
        auto it = known.find(n.get<std::string>());
        if (it == known.end()) return std::nullopt;
        value = value && it->second;
      }
    } else if (k == "not") {
      auto x = presence_value(v, known, depth + 1);
      if (!x) return std::nullopt;
      value = value && !*x;
    } else if (k == "anyOf" || k == "allOf" || k == "oneOf") {
      if (!v.is_array() || v.empty()) return std::nullopt;
      size_t matched = 0;
      for (const auto& b : v) {
        auto x = presence_value(b, known, depth + 1);
        if (!x) return std::nullopt;
        matched += *x;
      }
      value = value && (k == "anyOf"   ? matched > 0
                        : k == "allOf" ? matched == v.size()
                                       : matched == 1);
    } else {
      return std::nullopt;
    }
  }
  return value;
}

}  // namespace

Result<std::optional<Element>> SchemaCompiler::dependent_schema_cases(const Json& s,
                                                                      const std::string& ptr) {
  // Schema-valued dependencies beyond required names: "if name is present, the object also
  // matches d" == (name absent) or (name present and d), exact as a union of cases, one per
  // set of present trigger names. A case is dropped when it contradicts the object's own
  // `required` or a `false` property, or a dependent schema that only speaks of which
  // trigger names are present (`not {required: [b]}`, anyOf of required lists) fails in it;
  // such a schema that holds in the case is left out of it. Both are exact for objects.
  constexpr size_t kMaxTriggers = 12;  // 2^k presence sets are looked at
  constexpr size_t kMaxCases = 8;  // surviving cases become grammar alternatives (was 2^3)
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
  if (split.size() > kMaxTriggers)
    return unsupported("json schema: more than {} schema-valued dependencies at '{}'",
                       kMaxTriggers, ptr);
  std::set<std::string> required, banned;
  if (rest.contains("required") && rest["required"].is_array())
    for (const auto& n : rest["required"])
      if (n.is_string()) required.insert(n.get<std::string>());
  if (rest.contains("properties") && rest["properties"].is_object())
    for (const auto& [n, v] : rest["properties"].items())
      if (v == Json(false)) banned.insert(n);
  std::vector<Json> cases;
  for (uint32_t present = 0; present < (1u << split.size()); ++present) {
    std::map<std::string, bool> known;
    bool contradicts = false;
    for (size_t i = 0; i < split.size(); ++i) {
      const std::string& name = std::get<1>(split[i]);
      bool in = (present >> i) & 1;
      auto [it, fresh] = known.emplace(name, in);
      // The same name under two keywords: only the cases that agree on it.
      contradicts = contradicts || it->second != in || (in ? banned.count(name) > 0
                                                            : required.count(name) > 0);
    }
    if (contradicts) continue;
    Json c = rest;
    Json all = Json::array();
    for (size_t i = 0; i < split.size() && !contradicts; ++i) {
      const auto& [kw, name, d] = split[i];
      if ((present >> i) & 1) {
        all.push_back(Json{{"required", Json::array({name})}});
        std::optional<bool> holds = presence_value(d, known);
        if (holds && !*holds) contradicts = true;
        if (!holds) all.push_back(d);
      } else {
        if (!c.contains("properties") || !c["properties"].is_object())
          c["properties"] = Json::object();
        c["properties"][name] = false;  // absent
      }
    }
    if (contradicts) continue;
    if (!all.empty()) {
      all.insert(all.begin(), c);
      c = Json{{"allOf", all}};
    }
    cases.push_back(std::move(c));
  }
  if (cases.size() > kMaxCases)
    return unsupported(
        "json schema: schema-valued dependencies at '{}' leave {} cases (more than {})", ptr,
        cases.size(), kMaxCases);
  std::vector<Sequence> alts;
  for (const Json& c : cases) {
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

}  // namespace deepinfer::structured::detail
