// patternProperties with any number of patterns and any additionalProperties: the names an
// object may add beyond its declared properties are split by which patterns they match, each
// part with its own key automaton and the conjunction of the matching schemas as its value.
#include "deepinfer/engine/grammar/code_point_dfa.h"
#include "deepinfer/engine/grammar/json_schema_lowering.h"

namespace deepinfer::engine::grammar::detail {
namespace {

constexpr size_t kMaxPatternProperties = 4;  // 2^k name classes

}  // namespace

// The schema a property named `name` must satisfy given its declared schema (nullptr when
// undeclared): every matching pattern's schema, and additionalProperties only when neither
// declared nor matched. Returns nullptr when that is the declared schema unchanged.
Result<std::optional<Json>> SchemaCompiler::pattern_conjunction(const Json& pp,
                                                                const std::string& name,
                                                                const Json* declared,
                                                                const Json* addl) {
  Json all = Json::array();
  if (declared) all.push_back(*declared);
  for (const auto& [pattern, schema] : pp.items()) {
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(pattern, /*search=*/true));
    if (dfa_matches(d, name)) all.push_back(schema);
  }
  if (!declared && all.empty()) all.push_back(*addl);
  if (declared && all.size() == 1) return std::optional<Json>();
  if (all.size() == 1) return std::optional<Json>(all[0]);
  return std::optional<Json>(Json{{"allOf", all}});
}

Result<std::optional<Element>> SchemaCompiler::pattern_members(
    const Json& pp, const Json* addl, const std::vector<std::string>& names, const std::string& ptr,
    const CodePointDfa* name_filter) {
  const std::string pp_ptr = ptr + "/patternProperties";
  if (pp.size() > kMaxPatternProperties)
    return unsupported("json schema: keyword 'patternProperties' at '{}' has more than {} patterns",
                       pp_ptr, kMaxPatternProperties);
  std::vector<CodePointDfa> parts;
  std::vector<std::pair<std::string, const Json*>> patterns;
  for (const auto& [pattern, schema] : pp.items()) {
    auto d = dfa_from_pattern(pattern, /*search=*/true);
    if (!d.is_ok())
      return Status(d.status().code(), fmt::format("{} (at '{}')", d.status().message(), pp_ptr));
    parts.push_back(std::move(*d));
    patterns.emplace_back(pattern, &schema);
  }
  DI_ASSIGN_OR_RETURN(CodePointDfa declared, dfa_of_strings(names));
  parts.push_back(std::move(declared));
  std::vector<const CodePointDfa*> ptrs;
  for (const auto& p : parts) ptrs.push_back(&p);
  if (name_filter) ptrs.push_back(name_filter);  // last: every extra name must be in it
  const size_t k = patterns.size();
  const bool addl_false = addl->is_boolean() && !addl->get<bool>();

  std::vector<Sequence> alts;
  for (uint32_t sig = 0; sig < (1u << k); ++sig) {
    if (sig == 0 && addl_false) continue;
    // Names that match exactly the patterns in `sig` and are not declared.
    auto keys = dfa_product(ptrs, [&](const std::vector<bool>& a) {
      for (size_t i = 0; i < k; ++i)
        if (a[i] != ((sig >> i) & 1)) return false;
      return !a[k] && (!name_filter || a[k + 1]);
    });
    if (!keys.is_ok())
      return Status(keys.status().code(), fmt::format("json schema: property names at '{}': {}",
                                                      pp_ptr, keys.status().message()));
    if (dfa_is_empty(*keys)) continue;
    Json value;
    std::string value_ptr;
    if (sig == 0) {
      value = *addl;
      value_ptr = ptr + "/additionalProperties";
    } else {
      Json all = Json::array();
      for (size_t i = 0; i < k; ++i)
        if ((sig >> i) & 1) {
          all.push_back(*patterns[i].second);
          value_ptr = pp_ptr + "/" + patterns[i].first;
        }
      value = all.size() == 1 ? all[0] : Json{{"allOf", all}};
      if (all.size() > 1) value_ptr = pp_ptr;
    }
    DI_ASSIGN_OR_RETURN(Element v, gen(value, value_ptr));
    Element key = dfa_to_rule(b_, *keys, /*json_string=*/true, "pattern_key");
    alts.push_back(cat({lit("\""), {key}, lit("\""), ws_, lit(":"), ws_, {v}}));
  }
  if (alts.empty()) return std::optional<Element>();
  return std::optional<Element>(rule("pattern_member", std::move(alts)));
}

}  // namespace deepinfer::engine::grammar::detail
