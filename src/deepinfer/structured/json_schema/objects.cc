// Object lowering for the JSON Schema compiler: declared properties in schema order (optional
// ones skippable), then additional or pattern-matched members, with count bounds.
#include <deque>
#include <map>
#include <tuple>

#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured::detail {
namespace {

std::string escape_pointer(const std::string& k) {
  std::string out;
  for (char c : k) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

}  // namespace

// What gen_object works from, stage by stage: the members the layout writes by name (declared
// ones in schema order, then required-but-undeclared and dependency names), the schema that
// governs the others, and the one extra member (key and value) when extras may appear.
struct ObjectLayout {
  struct Prop {
    std::string name;
    const Json* schema;
    std::string ptr;
    bool required;
  };
  std::vector<Prop> props;
  std::set<std::string> declared;
  Json any = true, none = false;
  const Json no_patterns = Json::object();
  const Json* addl = nullptr;  // additionalProperties (or its default)
  std::string addl_ptr;
  const Json* pp = nullptr;    // patternProperties (or an empty object)
  std::map<std::string, std::optional<std::vector<std::string>>> deps;
  std::deque<Json> conjunctions;  // stable storage for the schemas props point to
  std::optional<CodePointDfa> name_filter;  // propertyNames as a language, when given
  std::optional<Element> extra;
  int64_t min_props = 0, max_props = -1;  // after the bounds the layout meets anyway are dropped
  bool count_layout = false;              // min/max counted along the declared layout
  Sequence sep;                           // ws , ws
  std::array<Sequence, 2> s_next;         // [comma needed] what follows the declared members
  std::map<std::tuple<int, int64_t, int64_t>, Sequence> extras_memo;
};

// The object lowering in stages (object_members, object_property_names, object_extra,
// object_counts), then one of three layouts of the declared members: counted or with
// dependencies (object_tracked), any order (object_any_order), or schema order (below).
Result<Element> SchemaCompiler::gen_object(const Json& s, const std::string& ptr) {
  ObjectLayout L;
  DI_RETURN_IF_ERROR(object_members(s, ptr, L));
  L.sep = cat({ws_, lit(","), ws_});
  DI_ASSIGN_OR_RETURN(bool possible, object_property_names(s, ptr, L));
  if (!possible) return never();
  DI_RETURN_IF_ERROR(object_extra(ptr, L));

  // A declared property whose schema is `false` cannot appear (oneOf cases forbid names this
  // way): it stays out of the layout but keeps its name out of the extra members.
  for (const auto& p : L.props)
    if (p.required && p.schema->is_boolean() && !p.schema->get<bool>()) return never();
  std::erase_if(L.props, [](const ObjectLayout::Prop& p) { return p.schema->is_boolean() && !p.schema->get<bool>(); });

  DI_ASSIGN_OR_RETURN(possible, object_counts(s, ptr, L));
  if (!possible) return never();
  // s_next[f]: the rest of the members after the declared ones (no count tracking).
  if (!L.count_layout) {
    for (int f = 0; f < 2; ++f) {
      auto e = object_extras(L, f, L.props.empty() ? L.min_props : 0, L.props.empty() ? L.max_props : -1);
      if (!e) return never();
      L.s_next[f] = *e;
    }
  }
  if (!L.deps.empty() || L.count_layout) return object_tracked(ptr, L);
  if (o_.any_order_keys && L.props.size() >= 2 && L.props.size() <= kMaxAnyOrderProperties)
    return object_any_order(L);
  const Sequence& sep = L.sep;
  std::array<Sequence, 2>& s_next = L.s_next;
  for (int64_t i = static_cast<int64_t>(L.props.size()) - 1; i >= 0; --i) {
    const ObjectLayout::Prop& p = L.props[i];
    DI_ASSIGN_OR_RETURN(Element m, object_member(lit(Json(p.name).dump()), *p.schema, p.ptr));
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

Result<Element> SchemaCompiler::object_member(const Sequence& key, const Json& schema, const std::string& p) {
  DI_ASSIGN_OR_RETURN(Element v, gen(schema, p));
  return rule("member", {cat({key, ws_, lit(":"), ws_, {v}})});
}

// The members written by name, each with the schema that governs it.
Status SchemaCompiler::object_members(const Json& s, const std::string& ptr, ObjectLayout& L) {
  std::set<std::string> required;
  if (s.contains("required") && s["required"].is_array())
    for (const auto& r : s["required"]) if (r.is_string()) required.insert(r.get<std::string>());
  auto& props = L.props;
  if (s.contains("properties") && s["properties"].is_object()) {
    for (const auto& [k, v] : s["properties"].items()) {
      props.push_back({k, &v, ptr + "/properties/" + escape_pointer(k), required.count(k) > 0});
      L.declared.insert(k);
    }
  }
  L.addl = s.contains("additionalProperties") ? &s["additionalProperties"]
           : (o_.strict_properties ? &L.none : &L.any);
  const Json* addl = L.addl;
  L.addl_ptr = ptr + "/additionalProperties";
  // Required but undeclared: written in the layout like a declared property, with the schema
  // that governs it (set below from patternProperties, else additionalProperties), and kept
  // out of the extra members by name.
  for (const auto& r : required)
    if (!L.declared.count(r)) props.push_back({r, addl, L.addl_ptr, true});
  // Names in dependencies that are not declared get a place in the layout (as optional
  // additional members) so they are tracked rather than produced blindly as extras.
  DI_ASSIGN_OR_RETURN(L.deps, dependencies(s, ptr));
  L.pp = s.contains("patternProperties") && s["patternProperties"].is_object()
             ? &s["patternProperties"]
             : &L.no_patterns;
  const Json& pp = *L.pp;
  bool extras_possible = !(addl->is_boolean() && !addl->get<bool>()) || !pp.empty();
  if (extras_possible) {
    std::set<std::string> have;
    for (const auto& p : props) have.insert(p.name);
    for (const auto& [t, d] : L.deps) {
      std::vector<std::string> names = {t};
      if (d) names.insert(names.end(), d->begin(), d->end());
      for (const auto& n : names)
        if (have.insert(n).second) props.push_back({n, addl, L.addl_ptr, false});
    }
  }
  // A name matching patterns must satisfy their schemas as well as its declared one (or,
  // when undeclared and matched, instead of additionalProperties). Done before propertyNames,
  // which may still rule a name out; a declared `false` stays `false`.
  if (!pp.empty()) {
    for (auto& p : props) {
      bool undeclared = !L.declared.count(p.name);
      if (!undeclared && p.schema->is_boolean() && !p.schema->get<bool>())
        continue;  // cannot appear
      DI_ASSIGN_OR_RETURN(std::optional<Json> c,
                          pattern_conjunction(pp, p.name, undeclared ? nullptr : p.schema, addl));
      if (c) {
        L.conjunctions.push_back(std::move(*c));
        p.schema = &L.conjunctions.back();
        if (undeclared)  // for messages: the pattern(s) governing it, if any
          for (const auto& [pattern, schema] : pp.items()) {
            DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(pattern, /*search=*/true, &patterns_));
            if (dfa_matches(d, p.name)) p.ptr = ptr + "/patternProperties";
          }
      }
    }
  }
  return Status::ok();
}

// propertyNames: declared names are checked one by one (a name it rejects cannot appear);
// extra names are intersected with its string language in the key automaton. False when a
// required name is rejected (no object can match).
Result<bool> SchemaCompiler::object_property_names(const Json& s, const std::string& ptr, ObjectLayout& L) {
  if (!s.contains("propertyNames")) return true;
  SchemaMerger merger = new_merger();
  DI_ASSIGN_OR_RETURN(const Json pn, merger.flatten(s["propertyNames"], ptr + "/propertyNames"));
  InstanceValidator validator = new_validator();
  for (auto& p : L.props) {
    Verdict v = validator.validate(pn, Json(p.name));
    if (v == Verdict::kUnknown)
      return unsupported("json schema: keyword 'propertyNames' at '{}/propertyNames' is not supported here", ptr);
    if (v == Verdict::kInvalid) {
      if (p.required) return false;
      p.schema = &L.none;
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
  L.name_filter = std::move(*lang);
  return true;
}

// One extra member (key and value), or none when no extra members are allowed.
Status SchemaCompiler::object_extra(const std::string& ptr, ObjectLayout& L) {
  const Json* addl = L.addl;
  if (L.name_filter || !L.pp->empty()) {
    std::vector<std::string> names;
    for (const auto& p : L.props) names.push_back(p.name);
    DI_ASSIGN_OR_RETURN(L.extra, pattern_members(*L.pp, addl, names, ptr, L.name_filter ? &*L.name_filter : nullptr));
  } else if (!(addl->is_boolean() && !addl->get<bool>())) {
    std::vector<std::string> names;
    for (const auto& p : L.props) names.push_back(p.name);
    DI_ASSIGN_OR_RETURN(Element k, key_excluding(b_, names));
    DI_ASSIGN_OR_RETURN(Element add, object_member({k}, *addl, L.addl_ptr));
    L.extra = add;
  }
  return Status::ok();
}

// Count bounds: ignored when the layout already meets them, applied to the extras when
// there are no declared properties, else counted along the layout. False when none can hold.
Result<bool> SchemaCompiler::object_counts(const Json& s, const std::string& ptr, ObjectLayout& L) {
  int64_t n_req = 0;
  for (const auto& p : L.props) n_req += p.required;
  int64_t& min_props = L.min_props;
  int64_t& max_props = L.max_props;
  if (s.contains("minProperties") && s["minProperties"].is_number())
    min_props = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(s["minProperties"].get<double>())));
  if (s.contains("maxProperties") && s["maxProperties"].is_number())
    max_props = std::max<int64_t>(0, static_cast<int64_t>(std::floor(s["maxProperties"].get<double>())));
  if (min_props <= n_req) min_props = 0;
  if (max_props >= 0 && !L.extra && static_cast<int64_t>(L.props.size()) <= max_props) max_props = -1;
  if (max_props >= 0 && min_props > max_props) return false;
  if (min_props > kMaxObjectExpand || max_props > kMaxObjectExpand)
    return unsupported("json schema: property count bound at '{}' is too large", ptr);
  L.count_layout = !L.props.empty() && (min_props > 0 || max_props >= 0);
  if (L.count_layout && std::max(min_props, max_props) > kMaxCountedProperties)
    return unsupported("json schema: minProperties/maxProperties at '{}' above {} with declared properties",
                       ptr, kMaxCountedProperties);
  return true;
}

// Between lo and hi extra members (hi < 0: unbounded); f = a member was already written (comma
// needed). nullopt when none may follow but lo > 0.
std::optional<Sequence> SchemaCompiler::object_extras(ObjectLayout& L, int f, int64_t lo, int64_t hi) {
  if (!L.extra || hi == 0) {
    if (lo > 0) return std::nullopt;
    return Sequence{};
  }
  auto key = std::make_tuple(f, lo, hi);
  if (auto it = L.extras_memo.find(key); it != L.extras_memo.end()) return it->second;
  const Element add = *L.extra;
  const Sequence& sep = L.sep;
  Sequence out;
  if (f) {
    out = {b_.repeat(cat({sep, {add}}), lo, hi, "extra")};
  } else {
    Sequence first = {add, b_.repeat(cat({sep, {add}}), std::max<int64_t>(0, lo - 1), hi < 0 ? -1 : hi - 1, "extra")};
    out = lo > 0 ? Sequence{rule("extra1", {first})} : Sequence{b_.optional(first, "extra0")};
  }
  L.extras_memo[key] = out;
  return out;
}

// Schema order, one rule per (position, which trigger/dependent names are written, members
// written so far when counted, comma needed): a trigger is written only when the dependents
// before it were, a dependent after a written trigger cannot be skipped, and the count ends
// within [minProperties, maxProperties] with the extras. Dead ends are pruned.
Result<Element> SchemaCompiler::object_tracked(const std::string& ptr, ObjectLayout& L) {
  const auto& props = L.props;
  const bool count_layout = L.count_layout;
  const int64_t min_props = L.min_props, max_props = L.max_props;
  const Sequence& sep = L.sep;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < props.size(); ++i) index[props[i].name] = i;
  std::vector<std::vector<size_t>> needs(props.size());  // [props] names prop i brings along
  std::vector<uint8_t> forbidden(props.size(), 0);
  std::vector<int> bit(props.size(), -1);
  int nbits = 0;
  for (const auto& [t, d] : L.deps) {
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
    DI_ASSIGN_OR_RETURN(Element m, object_member(lit(Json(p.name).dump()), *p.schema, p.ptr));
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
          ? object_extras(L, f, std::max<int64_t>(0, min_props - c), max_props < 0 ? -1 : max_props - c)
          : std::optional<Sequence>(L.s_next[f]);
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

// One rule per set of properties already written: any declared property not yet written may
// come next; the extras may follow once every required one is in.
Result<Element> SchemaCompiler::object_any_order(ObjectLayout& L) {
  const auto& props = L.props;
  const Sequence& sep = L.sep;
  std::vector<Element> members;
  uint32_t required_mask = 0;
  for (size_t i = 0; i < props.size(); ++i) {
    DI_ASSIGN_OR_RETURN(Element m, object_member(lit(Json(props[i].name).dump()), *props[i].schema, props[i].ptr));
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
    if ((done & required_mask) == required_mask) alts.push_back(L.s_next[done ? 1 : 0]);
    state[done] = rule("props_any", std::move(alts));
    return *state[done];
  };
  return rule("object", {cat({lit("{"), ws_, {after(0)}, ws_, lit("}")})});
}

}  // namespace deepinfer::structured::detail
