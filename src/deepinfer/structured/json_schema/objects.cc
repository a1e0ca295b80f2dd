// Object lowering for the JSON Schema compiler: declared properties in schema order (optional
// ones skippable), then additional or pattern-matched members, with count bounds.
#include <deque>
#include <map>
#include <tuple>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/json_schema/lowering.h"

namespace deepinfer::structured::detail {
namespace {

struct Prop {
  std::string name;
  const Json* schema;
  std::string ptr;
  bool required;
};

std::string escape_pointer(const std::string& k) {
  std::string out;
  for (char c : k) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

}  // namespace

Result<Element> SchemaCompiler::gen_object(const Json& s, const std::string& ptr) {
  std::set<std::string> required;
  if (s.contains("required") && s["required"].is_array())
    for (const auto& r : s["required"]) if (r.is_string()) required.insert(r.get<std::string>());
  std::vector<Prop> props;
  std::set<std::string> declared;
  if (s.contains("properties") && s["properties"].is_object()) {
    for (const auto& [k, v] : s["properties"].items()) {
      props.push_back({k, &v, ptr + "/properties/" + escape_pointer(k), required.count(k) > 0});
      declared.insert(k);
    }
  }
  Json any = true, none = false;
  const Json* addl = s.contains("additionalProperties") ? &s["additionalProperties"]
                     : (o_.strict_properties ? &none : &any);
  std::string addl_ptr = ptr + "/additionalProperties";
  // Required but undeclared: written in the layout like a declared property, with the schema
  // that governs it (set below from patternProperties, else additionalProperties), and kept
  // out of the extra members by name.
  for (const auto& r : required)
    if (!declared.count(r)) props.push_back({r, addl, addl_ptr, true});
  // Names in dependencies that are not declared get a place in the layout (as optional
  // additional members) so they are tracked rather than produced blindly as extras.
  DI_ASSIGN_OR_RETURN(auto deps, dependencies(s, ptr));
  const Json no_patterns = Json::object();
  const Json& pp = s.contains("patternProperties") && s["patternProperties"].is_object()
                       ? s["patternProperties"]
                       : no_patterns;
  bool extras_possible = !(addl->is_boolean() && !addl->get<bool>()) || !pp.empty();
  if (extras_possible) {
    std::set<std::string> have;
    for (const auto& p : props) have.insert(p.name);
    for (const auto& [t, d] : deps) {
      std::vector<std::string> names = {t};
      if (d) names.insert(names.end(), d->begin(), d->end());
      for (const auto& n : names)
        if (have.insert(n).second) props.push_back({n, addl, addl_ptr, false});
    }
  }
  // A name matching patterns must satisfy their schemas as well as its declared one (or,
  // when undeclared and matched, instead of additionalProperties). Done before propertyNames,
  // which may still rule a name out; a declared `false` stays `false`.
  std::deque<Json> conjunctions;  // stable storage for the schemas props point to
  if (!pp.empty()) {
    for (auto& p : props) {
      bool undeclared = !declared.count(p.name);
      if (!undeclared && p.schema->is_boolean() && !p.schema->get<bool>())
        continue;  // cannot appear
      DI_ASSIGN_OR_RETURN(std::optional<Json> c,
                          pattern_conjunction(pp, p.name, undeclared ? nullptr : p.schema, addl));
      if (c) {
        conjunctions.push_back(std::move(*c));
        p.schema = &conjunctions.back();
        if (undeclared)  // for messages: the pattern(s) governing it, if any
          for (const auto& [pattern, schema] : pp.items()) {
            DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(pattern, /*search=*/true));
            if (dfa_matches(d, p.name)) p.ptr = ptr + "/patternProperties";
          }
      }
    }
  }

  Sequence sep = cat({ws_, lit(","), ws_});
  auto member = [&](const Sequence& key, const Json& schema, const std::string& p) -> Result<Element> {
    DI_ASSIGN_OR_RETURN(Element v, gen(schema, p));
    return rule("member", {cat({key, ws_, lit(":"), ws_, {v}})});
  };
  // propertyNames: declared names are checked one by one (a name it rejects cannot appear);
  // extra names are intersected with its string language in the key automaton.
  std::optional<CodePointDfa> name_filter;
  if (s.contains("propertyNames")) {
    SchemaMerger merger([this](const std::string& r, const std::string& q) { return resolve(r, q); });
    DI_ASSIGN_OR_RETURN(const Json pn, merger.flatten(s["propertyNames"], ptr + "/propertyNames"));
    InstanceValidator validator(root_, o_.enforce_formats);
    for (auto& p : props) {
      Verdict v = validator.validate(pn, Json(p.name));
      if (v == Verdict::kUnknown)
        return unsupported("json schema: keyword 'propertyNames' at '{}/propertyNames' is not supported here", ptr);
      if (v == Verdict::kInvalid) {
        if (p.required) return never();
        p.schema = &none;
      }
    }
    DI_ASSIGN_OR_RETURN(auto lang, string_language(pn));
    if (!lang) return unsupported("json schema: keyword 'propertyNames' at '{}/propertyNames' is not supported here", ptr);
    bool strings = true;  // string_language ignores `type`; a non-string type admits no name
    if (pn.is_object() && pn.contains("type")) {
      const Json& t = pn["type"];
      strings = t == "string" || (t.is_array() && std::find(t.begin(), t.end(), "string") != t.end());
    }
    if (!strings) {
      DI_ASSIGN_OR_RETURN(*lang, dfa_of_strings({}));
    }
    name_filter = std::move(*lang);
  }
  // One extra member (key and value), or none when no extra members are allowed.
  std::optional<Element> extra;
  if (name_filter || !pp.empty()) {
    std::vector<std::string> names;
    for (const auto& p : props) names.push_back(p.name);
    DI_ASSIGN_OR_RETURN(extra, pattern_members(pp, addl, names, ptr, name_filter ? &*name_filter : nullptr));
  } else if (!(addl->is_boolean() && !addl->get<bool>())) {
    std::vector<std::string> names;
    for (const auto& p : props) names.push_back(p.name);
    DI_ASSIGN_OR_RETURN(Element k, key_excluding(b_, names));
    DI_ASSIGN_OR_RETURN(Element add, member({k}, *addl, addl_ptr));
    extra = add;
  }

  // A declared property whose schema is `false` cannot appear (oneOf cases forbid names this
  // way): it stays out of the layout but keeps its name out of the extra members.
  for (const auto& p : props)
    if (p.required && p.schema->is_boolean() && !p.schema->get<bool>()) return never();
  std::erase_if(props, [](const Prop& p) { return p.schema->is_boolean() && !p.schema->get<bool>(); });

  // Count bounds: ignored when the layout already meets them, applied to the extras when
  // there are no declared properties, else counted along the layout below.
  int64_t n_req = 0;
  for (const auto& p : props) n_req += p.required;
  int64_t min_props = 0, max_props = -1;
  if (s.contains("minProperties") && s["minProperties"].is_number())
    min_props = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(s["minProperties"].get<double>())));
  if (s.contains("maxProperties") && s["maxProperties"].is_number())
    max_props = std::max<int64_t>(0, static_cast<int64_t>(std::floor(s["maxProperties"].get<double>())));
  if (min_props <= n_req) min_props = 0;
  if (max_props >= 0 && !extra && static_cast<int64_t>(props.size()) <= max_props) max_props = -1;
  if (max_props >= 0 && min_props > max_props) return never();
  if (min_props > kMaxObjectExpand || max_props > kMaxObjectExpand)
    return unsupported("json schema: property count bound at '{}' is too large", ptr);
  const bool count_layout = !props.empty() && (min_props > 0 || max_props >= 0);
  if (count_layout && std::max(min_props, max_props) > kMaxCountedProperties)
    return unsupported("json schema: minProperties/maxProperties at '{}' above {} with declared properties",
                       ptr, kMaxCountedProperties);

  // extras(f, lo, hi): between lo and hi extra members (hi < 0: unbounded); f = a member was
  // already written (comma needed). nullopt when none may follow but lo > 0.
  std::map<std::tuple<int, int64_t, int64_t>, Sequence> extras_memo;
  auto extras = [&](int f, int64_t lo, int64_t hi) -> std::optional<Sequence> {
    if (!extra || hi == 0) {
      if (lo > 0) return std::nullopt;
      return Sequence{};
    }
    auto key = std::make_tuple(f, lo, hi);
    if (auto it = extras_memo.find(key); it != extras_memo.end()) return it->second;
    const Element add = *extra;
    Sequence out;
    if (f) {
      out = {b_.repeat(cat({sep, {add}}), lo, hi, "extra")};
    } else {
      Sequence first = {add, b_.repeat(cat({sep, {add}}), std::max<int64_t>(0, lo - 1), hi < 0 ? -1 : hi - 1, "extra")};
      out = lo > 0 ? Sequence{rule("extra1", {first})} : Sequence{b_.optional(first, "extra0")};
    }
    extras_memo[key] = out;
    return out;
  };
  // s_next[f]: the rest of the members after the declared ones (no count tracking).
  std::array<Sequence, 2> s_next;
  if (!count_layout) {
    for (int f = 0; f < 2; ++f) {
      auto e = extras(f, props.empty() ? min_props : 0, props.empty() ? max_props : -1);
      if (!e) return never();
      s_next[f] = *e;
    }
  }
  if (!deps.empty() || count_layout) {
    // Schema order, one rule per (position, which trigger/dependent names are written, members
    // written so far when counted, comma needed): a trigger is written only when the
    // dependents before it were, a dependent after a written trigger cannot be skipped, and
    // the count ends within [minProperties, maxProperties] with the extras. Dead ends are
    // pruned.
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < props.size(); ++i) index[props[i].name] = i;
    std::vector<std::vector<size_t>> needs(props.size());  // [props] names prop i brings along
    std::vector<uint8_t> forbidden(props.size(), 0);
    std::vector<int> bit(props.size(), -1);
    int nbits = 0;
    for (const auto& [t, d] : deps) {
      auto it = index.find(t);
      if (it == index.end()) continue;  // not in the layout: no extras, so it never appears
      if (!d) { forbidden[it->second] = 1; continue; }
      for (const auto& n : *d) {
        auto jt = index.find(n);
        if (jt == index.end()) {  // the dependent can never appear, so neither can the trigger
          forbidden[it->second] = 1;
          continue;
        }
        if (jt->second == it->second) continue;
        needs[it->second].push_back(jt->second);
        for (size_t x : {it->second, jt->second}) if (bit[x] < 0) bit[x] = nbits++;
      }
    }
    if (nbits > 12) return unsupported("json schema: keyword 'dependencies' at '{}' involves more than 12 properties", ptr);
    std::vector<Element> members;
    for (const auto& p : props) {
      DI_ASSIGN_OR_RETURN(Element m, member(lit(Json(p.name).dump()), *p.schema, p.ptr));
      members.push_back(m);
    }
    // Counts saturate at minProperties when there is no maximum.
    const int64_t count_cap = !count_layout ? 0 : max_props >= 0 ? max_props : min_props;
    auto written = [&](uint32_t w, size_t i) { return bit[i] >= 0 && ((w >> bit[i]) & 1); };
    std::map<std::tuple<size_t, uint32_t, int64_t, int>, std::optional<Element>> memo;
    std::function<std::optional<Element>(size_t, uint32_t, int64_t, int)> after =
        [&](size_t i, uint32_t w, int64_t c, int f) -> std::optional<Element> {
      auto key = std::make_tuple(i, w, c, f);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      std::vector<Sequence> alts;
      if (i == props.size()) {
        std::optional<Sequence> tail = count_layout
            ? extras(f, std::max<int64_t>(0, min_props - c), max_props < 0 ? -1 : max_props - c)
            : std::optional<Sequence>(s_next[f]);
        if (tail) alts.push_back(*tail);
      } else {
        bool can_write = !forbidden[i] && (max_props < 0 || !count_layout || c < max_props);
        for (size_t d : needs[i]) if (d < i && !written(w, d)) can_write = false;
        if (can_write) {
          uint32_t w2 = bit[i] >= 0 ? w | (1u << bit[i]) : w;
          int64_t c2 = count_layout ? std::min(c + 1, count_cap) : 0;
          if (auto rest = after(i + 1, w2, c2, 1)) alts.push_back(cat({f ? sep : Sequence{}, {members[i], *rest}}));
        }
        bool owed = props[i].required;
        for (size_t t = 0; t < i && !owed; ++t)
          if (written(w, t)) owed = std::find(needs[t].begin(), needs[t].end(), i) != needs[t].end();
        if (!owed)
          if (auto rest = after(i + 1, w, c, f)) alts.push_back({*rest});
      }
      std::optional<Element> r;
      if (!alts.empty()) r = rule("props_dep", std::move(alts));
      memo[key] = r;
      return r;
    };
    std::optional<Element> top = after(0, 0, 0, 0);
    if (!top) return never();
    return rule("object", {cat({lit("{"), ws_, {*top}, ws_, lit("}")})});
  }
  if (o_.any_order_keys && props.size() >= 2 && props.size() <= kMaxAnyOrderProperties) {
    // One rule per set of properties already written: any declared property not yet written
    // may come next; the extras may follow once every required one is in.
    std::vector<Element> members;
    uint32_t required_mask = 0;
    for (size_t i = 0; i < props.size(); ++i) {
      DI_ASSIGN_OR_RETURN(Element m, member(lit(Json(props[i].name).dump()), *props[i].schema, props[i].ptr));
      members.push_back(m);
      if (props[i].required) required_mask |= 1u << i;
    }
    const uint32_t full = (1u << props.size()) - 1;
    std::vector<std::optional<Element>> state(full + 1);
    std::function<Element(uint32_t)> after = [&](uint32_t done) -> Element {
      if (state[done]) return *state[done];
      std::vector<Sequence> alts;
      for (size_t i = 0; i < props.size(); ++i)
        if (!(done & (1u << i)))
          alts.push_back(cat({done ? sep : Sequence{}, {members[i], after(done | (1u << i))}}));
      if ((done & required_mask) == required_mask) alts.push_back(s_next[done ? 1 : 0]);
      state[done] = rule("props_any", std::move(alts));
      return *state[done];
    };
    return rule("object", {cat({lit("{"), ws_, {after(0)}, ws_, lit("}")})});
  }
  for (int64_t i = static_cast<int64_t>(props.size()) - 1; i >= 0; --i) {
    const Prop& p = props[i];
    DI_ASSIGN_OR_RETURN(Element m, member(lit(Json(p.name).dump()), *p.schema, p.ptr));
    std::array<Sequence, 2> cur;
    for (int f = 0; f < 2; ++f) {
      std::vector<Sequence> alts;
      alts.push_back(cat({f ? sep : Sequence{}, {m}, s_next[1]}));
      if (!p.required) alts.push_back(s_next[f]);
      cur[f] = {rule("props", std::move(alts))};
    }
    s_next = std::move(cur);
  }
  return rule("object", {cat({lit("{"), ws_, s_next[0], ws_, lit("}")})});
}

}  // namespace deepinfer::structured::detail
