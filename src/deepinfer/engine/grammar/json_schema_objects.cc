// Object lowering for the JSON Schema compiler: declared properties in schema order (optional
// ones skippable), then additional or pattern-matched members, with count bounds.
#include "deepinfer/engine/grammar/json_schema_lowering.h"
#include "deepinfer/engine/grammar/stack_pool.h"

namespace deepinfer::engine::grammar::detail {
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

// Whether a property name matches a JSON Schema pattern (search semantics).
Result<bool> pattern_matches(const std::string& pattern, const std::string& name) {
  GrammarBuilder b;
  DI_ASSIGN_OR_RETURN(Element e, compile_regex(b, pattern, {.json_string = true, .search = true}));
  uint32_t top = b.rule_with_alts("top", {{e}});
  DI_ASSIGN_OR_RETURN(Grammar g, b.build(top));
  StackPool pool(&g);
  std::vector<uint32_t> cur = pool.initial(top), next;
  std::string body = Json(name).dump();
  for (size_t i = 1; i + 1 < body.size(); ++i) {
    pool.advance(cur, static_cast<uint8_t>(body[i]), next);
    cur.swap(next);
  }
  return std::find(cur.begin(), cur.end(), StackPool::kAccept) != cur.end();
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
  for (const auto& r : required)  // required but undeclared: must come from additionalProperties
    if (!declared.count(r)) props.push_back({r, addl, addl_ptr, true});

  // The rule for keys of extra members, or none when no extra members are allowed.
  std::optional<Element> extra_key;
  const Json* extra_schema = addl;
  std::string extra_ptr = addl_ptr;
  if (s.contains("patternProperties") && s["patternProperties"].is_object() &&
      !s["patternProperties"].empty()) {
    const Json& pp = s["patternProperties"];
    bool addl_false = addl->is_boolean() && !addl->get<bool>();
    if (pp.size() > 1 || !addl_false)
      return unsupported("json schema: keyword 'patternProperties' at '{}/patternProperties' is "
                         "supported only with one pattern and additionalProperties false", ptr);
    std::string pattern = pp.items().begin().key();
    for (const auto& p : props) {
      DI_ASSIGN_OR_RETURN(bool m, pattern_matches(pattern, p.name));
      if (m) return unsupported("json schema: property '{}' at '{}' also matches patternProperties",
                                p.name, ptr);
    }
    auto re = compile_regex(b_, pattern, {.json_string = true, .search = true});
    if (!re.is_ok())
      return Status(re.status().code(), fmt::format("{} (at '{}/patternProperties')", re.status().message(), ptr));
    extra_key = rule("pattern_key", {cat({lit("\""), {*re}, lit("\"")})});
    extra_schema = &pp.items().begin().value();
    extra_ptr = ptr + "/patternProperties/" + escape_pointer(pattern);
  } else if (!(addl->is_boolean() && !addl->get<bool>())) {
    std::vector<std::string> names;
    for (const auto& p : props) {
      std::string q = Json(p.name).dump();
      names.push_back(q.substr(1, q.size() - 2));
    }
    DI_ASSIGN_OR_RETURN(Element k, key_excluding(b_, names));
    extra_key = k;
  }

  // Count bounds: checked against what the layout already guarantees, else applied to extras.
  int64_t n_req = 0;
  for (const auto& p : props) n_req += p.required;
  int64_t tmin = 0, tmax = -1;
  if (s.contains("minProperties") && s["minProperties"].is_number()) {
    int64_t m = static_cast<int64_t>(std::ceil(s["minProperties"].get<double>()));
    if (m > n_req) {
      if (!props.empty() || !extra_key)
        return unsupported("json schema: keyword 'minProperties' at '{}/minProperties' is not "
                           "supported with optional properties", ptr);
      tmin = m;
    }
  }
  if (s.contains("maxProperties") && s["maxProperties"].is_number()) {
    int64_t m = static_cast<int64_t>(std::floor(s["maxProperties"].get<double>()));
    if (extra_key || static_cast<int64_t>(props.size()) > m) {
      if (!props.empty())
        return unsupported("json schema: keyword 'maxProperties' at '{}/maxProperties' is not "
                           "supported with declared properties", ptr);
      tmax = m;
    }
  }
  if (tmax >= 0 && tmin > tmax) return never();
  if (tmin > kMaxObjectExpand || tmax > kMaxObjectExpand)
    return unsupported("json schema: property count bound at '{}' is too large", ptr);

  Sequence sep = cat({ws_, lit(","), ws_});
  auto member = [&](const Sequence& key, const Json& schema, const std::string& p) -> Result<Element> {
    DI_ASSIGN_OR_RETURN(Element v, gen(schema, p));
    return rule("member", {cat({key, ws_, lit(":"), ws_, {v}})});
  };
  // s_next[f]: the rest of the members, f = a member was already written (comma needed).
  std::array<Sequence, 2> s_next;
  if (extra_key) {
    DI_ASSIGN_OR_RETURN(Element add, member({*extra_key}, *extra_schema, extra_ptr));
    s_next[1] = {b_.repeat(cat({sep, {add}}), tmin, tmax, "extra")};
    Sequence first = {add, b_.repeat(cat({sep, {add}}), std::max<int64_t>(0, tmin - 1),
                                     tmax < 0 ? -1 : tmax - 1, "extra")};
    if (tmax == 0) s_next[0] = {};
    else s_next[0] = tmin > 0 ? Sequence{rule("extra1", {first})} : Sequence{b_.optional(first, "extra0")};
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

}  // namespace deepinfer::engine::grammar::detail
