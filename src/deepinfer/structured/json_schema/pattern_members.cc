// patternProperties with any number of patterns and any additionalProperties: the names an
// object may add beyond its declared properties are split by which patterns they match, each
// part with its own key automaton and the conjunction of the matching schemas as its value.
#include <algorithm>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured::detail {
namespace {

// The names are split into classes by which patterns they match. Only classes with some name
// are built: a search over the patterns that drops a partial signature as soon as no name
// fits it, so disjoint patterns cost k + 1 classes, not 2^k. These caps bound that search.
constexpr size_t kMaxPatternProperties = 64;
constexpr size_t kMaxNameClasses = 64;

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
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(pattern, /*search=*/true, &patterns_));
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
    auto d = dfa_from_pattern(pattern, /*search=*/true, &patterns_);
    if (!d.is_ok())
      return Status(d.status().code(), fmt::format("{} (at '{}')", d.status().message(), pp_ptr));
    parts.push_back(std::move(*d));
    patterns.emplace_back(pattern, &schema);
  }
  DI_ASSIGN_OR_RETURN(CodePointDfa declared, dfa_of_strings(names));
  parts.push_back(std::move(declared));
  const size_t k = patterns.size();
  const bool addl_false = addl->is_boolean() && !addl->get<bool>();

  // Names not declared (and in the filter), then refined pattern by pattern: `lang` holds
  // the names that match exactly the patterns whose bits are set in `sig` among the first
  // `i`. A class found empty is dropped with all its refinements.
  auto fail = [&](const Status& st) {
    return Status(st.code(), fmt::format("json schema: property names at '{}': {}", pp_ptr,
                                         st.message()));
  };
  std::vector<const CodePointDfa*> base = {&parts[k]};
  if (name_filter) base.push_back(name_filter);
  auto undeclared = dfa_product(base, [](const std::vector<bool>& a) {
    return !a[0] && (a.size() == 1 || a[1]);
  });
  if (!undeclared.is_ok()) return fail(undeclared.status());
  struct NameClass {
    CodePointDfa lang;
    std::vector<bool> sig;  // [k]
  };
  std::vector<NameClass> classes;
  std::vector<NameClass> work;
  if (!dfa_is_empty(*undeclared)) work.push_back({std::move(*undeclared), {}});
  while (!work.empty()) {
    NameClass c = std::move(work.back());
    work.pop_back();
    const size_t i = c.sig.size();
    if (i == k) {
      if (classes.size() >= kMaxNameClasses)
        return unsupported("json schema: keyword 'patternProperties' at '{}' splits property "
                           "names into more than {} classes",
                           pp_ptr, kMaxNameClasses);
      classes.push_back(std::move(c));
      continue;
    }
    for (bool in : {false, true}) {
      auto refined = dfa_product({&c.lang, &parts[i]}, [in](const std::vector<bool>& a) {
        return a[0] && a[1] == in;
      });
      if (!refined.is_ok()) return fail(refined.status());
      if (dfa_is_empty(*refined)) continue;
      NameClass r{std::move(*refined), c.sig};
      r.sig.push_back(in);
      work.push_back(std::move(r));
    }
    if (work.size() + classes.size() > 4 * kMaxNameClasses)
      return unsupported("json schema: keyword 'patternProperties' at '{}' splits property "
                         "names into more than {} classes",
                         pp_ptr, kMaxNameClasses);
  }
  // Same order as before the search existed: by signature, bit i = pattern i.
  auto code = [](const std::vector<bool>& sig) {
    uint64_t v = 0;
    for (size_t i = 0; i < sig.size(); ++i) v |= uint64_t{sig[i]} << i;
    return v;
  };
  std::sort(classes.begin(), classes.end(),
            [&](const NameClass& x, const NameClass& y) { return code(x.sig) < code(y.sig); });

  std::vector<Sequence> alts;
  for (const auto& c : classes) {
    const bool none = std::find(c.sig.begin(), c.sig.end(), true) == c.sig.end();
    if (none && addl_false) continue;
    Json value;
    std::string value_ptr;
    if (none) {
      value = *addl;
      value_ptr = ptr + "/additionalProperties";
    } else {
      Json all = Json::array();
      for (size_t i = 0; i < k; ++i)
        if (c.sig[i]) {
          all.push_back(*patterns[i].second);
          value_ptr = pp_ptr + "/" + patterns[i].first;
        }
      value = all.size() == 1 ? all[0] : Json{{"allOf", all}};
      if (all.size() > 1) value_ptr = pp_ptr;
    }
    DI_ASSIGN_OR_RETURN(Element v, gen(value, value_ptr));
    Element key = dfa_to_rule(b_, c.lang, /*json_string=*/true, "pattern_key");
    alts.push_back(cat({lit("\""), {key}, lit("\""), ws_, lit(":"), ws_, {v}}));
  }
  if (alts.empty()) return std::optional<Element>();
  return std::optional<Element>(rule("pattern_member", std::move(alts)));
}

}  // namespace deepinfer::structured::detail
