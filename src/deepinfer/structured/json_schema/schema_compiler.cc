// SchemaCompiler (schema_compiler.h): the walk over a schema document (gen, gen_inner), $ref
// and anchors, enum/const by validation, if/then/else, the `not` cases that drop out, and
// anyOf/oneOf. Per-type and per-keyword lowering lives in the other files of this folder
// (README.md beside the module has the keyword -> file table).
#include "deepinfer/structured/json_schema/schema_compiler.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::structured::detail {

SchemaCompiler::SchemaCompiler(const Json& root, const JsonSchemaOptions& o, const GrammarLimits& l)
    : root_(root), o_(o), b_(l) {
  ByteSet w;
  for (char c : std::string(" \t\n\r")) w.set(static_cast<uint8_t>(c));
  if (o_.any_whitespace) ws_ = Sequence{b_.star({b_.bytes(w)}, "ws")};
}

Result<Grammar> SchemaCompiler::run() {
  DI_ASSIGN_OR_RETURN(Element e, gen(root_, ""));
  uint32_t top = b_.rule_with_alts("root", {cat({ws_, {e}, ws_})});
  static constexpr const char* kNothing =
      "json schema: no JSON value satisfies it (false, a $ref that only leads back to itself, "
      "contradictory keywords, or a required property whose schema nothing satisfies)";
  Result<Grammar> g = b_.build(top, kNothing);
  if (g.is_ok() || g.status().message() != kNothing || !has_approximated_keyword(root_)) return g;
  // oneOf, not and if/else are written as sound subsets (docs/structured_outputs.md): the
  // empty grammar may be ours, not the schema's, so say so instead of calling it unsatisfiable.
  return unsupported(
      "json schema: no JSON value satisfies it as this engine writes it: its oneOf/not/if "
      "are lowered to sound subsets that may leave out every instance (or nothing satisfies "
      "it at all)");
}

bool SchemaCompiler::has_approximated_keyword(const Json& root) {
  std::vector<const Json*> stack = {&root};
  while (!stack.empty()) {
    const Json* v = stack.back();
    stack.pop_back();
    if (v->is_object())
      for (const auto& [k, x] : v->items()) {
        if (k == "oneOf" || k == "not" || k == "if" || k == "else") return true;
        if (x.is_structured()) stack.push_back(&x);
      }
    else if (v->is_array())
      for (const auto& x : *v)
        if (x.is_structured()) stack.push_back(&x);
  }
  return false;
}

Element SchemaCompiler::any_string() {
  if (!any_string_) {
    any_string_ = rule("string", {cat({lit("\""), {b_.star({json_string_char(b_)}, "chars")}, lit("\"")})});
  }
  return *any_string_;
}

Element SchemaCompiler::any_value() {
  if (any_value_) return *any_value_;
  uint32_t v = b_.new_rule("value");
  any_value_ = GrammarBuilder::call(v);
  Sequence sep = cat({ws_, lit(","), ws_});
  Element member = rule("member", {cat({{any_string()}, ws_, lit(":"), ws_, {*any_value_}})});
  Element members = b_.star(cat({sep, {member}}), "members");
  Element obj = rule("object", {cat({lit("{"), ws_, {member, members}, ws_, lit("}")}),
                                cat({lit("{"), ws_, lit("}")})});
  Element items = b_.star(cat({sep, {*any_value_}}), "items");
  Element arr = rule("array", {cat({lit("["), ws_, {*any_value_, items}, ws_, lit("]")}),
                               cat({lit("["), ws_, lit("]")})});
  for (Sequence alt : {Sequence{obj}, Sequence{arr}, Sequence{any_string()},
                       Sequence{any_number(b_)}, lit("true"), lit("false"), lit("null")})
    b_.add_alt(v, std::move(alt));
  return *any_value_;
}

Result<const Json*> SchemaCompiler::resolve(const std::string& ref, const std::string& ptr) {
  if (ref.empty() || ref[0] != '#')
    return unsupported("json schema: non-local $ref '{}' at {}", ref, ptr);
  std::string frag = ref.substr(1);
  std::string decoded;
  for (size_t i = 0; i < frag.size(); ++i) {
    if (frag[i] == '%' && i + 2 < frag.size()) {
      decoded += static_cast<char>(std::stoi(frag.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += frag[i];
    }
  }
  if (!decoded.empty() && decoded[0] != '/') {
    if (const Json* t = find_anchor(decoded)) return t;
    return unsupported("json schema: $ref to anchor '{}' at {}", ref, ptr);
  }
  try {
    const Json& t = root_.at(Json::json_pointer(decoded));
    return &t;
  } catch (const std::exception&) {
    return invalid_argument("json schema: $ref '{}' at {} does not resolve", ref, ptr);
  }
}

const Json* SchemaCompiler::find_anchor(const std::string& name) {
  const Json* found = nullptr;
  int matches = 0;
  bool rebased = false;
  std::function<void(const Json&, bool)> walk = [&](const Json& x, bool top) {
    if (x.is_array()) {
      for (const auto& y : x) walk(y, false);
      return;
    }
    if (!x.is_object()) return;
    bool named = false;
    for (const auto& [k, v] : x.items()) {
      if (!v.is_string()) continue;
      const std::string& t = v.get_ref<const std::string&>();
      if (k == "$anchor" && t == name) named = true;
      if ((k == "$id" || k == "id") && !t.empty() && t[0] == '#' && t.substr(1) == name)
        named = true;
      if ((k == "$id" || k == "id") && (t.empty() || t[0] != '#') && !top) rebased = true;
    }
    if (named) {
      found = &x;
      ++matches;
    }
    for (const auto& [k, v] : x.items())
      if (k != "enum" && k != "const" && k != "default" && k != "examples") walk(v, false);
  };
  walk(root_, true);
  return matches == 1 && !rebased ? found : nullptr;
}

Result<Element> SchemaCompiler::gen_ref(const std::string& ref, const std::string& ptr) {
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return GrammarBuilder::call(it->second);
  DI_ASSIGN_OR_RETURN(const Json* target, resolve(ref, ptr));
  uint32_t r = b_.new_rule("ref");
  ref_rules_[ref] = r;
  DI_ASSIGN_OR_RETURN(Element e, gen(*target, ref.substr(1)));
  b_.add_alt(r, {e});
  return GrammarBuilder::call(r);
}

Result<Element> SchemaCompiler::gen(const Json& s, const std::string& ptr) {
  DI_RETURN_IF_ERROR(b_.check_budget());
  if (++depth_ > 200) return resource_exhausted("json schema: nesting too deep at {}", ptr);
  auto result = gen_inner(s, ptr);
  --depth_;
  return result;
}

Result<Element> SchemaCompiler::gen_inner(const Json& s, const std::string& ptr) {
  if (s.is_boolean()) return s.get<bool>() ? any_value() : never();
  if (!s.is_object()) return invalid_argument("json schema: schema at '{}' is not an object", ptr);
  if (s.contains("enum") || s.contains("const")) {
    // A finite set of values: every other keyword is decided per value by validation.
    if (auto e = enum_by_validation(s)) return *e;
  }
  {
    // Integer multipleOf under not/allOf/anyOf/oneOf: decided per remainder.
    DI_ASSIGN_OR_RETURN(auto residues, residue_number(s, ptr));
    if (residues) return *residues;
  }
  // With $ref, allOf, anyOf or oneOf next to it, `not` is merged into those first (a
  // conjunction distributes into anyOf and oneOf branches exactly).
  if (s.contains("not") && !s.contains("$ref") && !s.contains("allOf") && !s.contains("anyOf") &&
      !s.contains("oneOf")) {
    std::optional<Json> without = drop_simple_not(s);
    if (!without) return gen_not(s, ptr);
    return gen(*without, ptr);
  }
  if (s.contains("if") || s.contains("then") || s.contains("else")) return gen_if(s, ptr);
  for (const auto& [k, v] : s.items()) {
    if (kRefused.count(k))
      return unsupported("json schema: keyword '{}' at '{}/{}' is not supported", k, ptr, k);
  }
  if (s.contains("$ref") || s.contains("allOf")) {
    SchemaMerger merger = new_merger();
    if (s.contains("$ref") && !has_validation_siblings(s)) {
      if (!s["$ref"].is_string()) return invalid_argument("json schema: $ref at '{}' is not a string", ptr);
      return gen_ref(s["$ref"].get<std::string>(), ptr + "/$ref");
    }
    // $ref with siblings is inlined; one rule per distinct schema text, so a recursive
    // definition reached this way becomes a recursive rule instead of endless inlining.
    std::string key = s.dump();
    if (auto it = merged_rules_.find(key); it != merged_rules_.end()) return GrammarBuilder::call(it->second);
    uint32_t r = b_.new_rule("merged");
    merged_rules_[key] = r;
    DI_ASSIGN_OR_RETURN(Json merged, merger.flatten(s, ptr));
    DI_ASSIGN_OR_RETURN(Element e, gen(merged, ptr));
    b_.add_alt(r, {e});
    return GrammarBuilder::call(r);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return gen_union(s, ptr);
  DI_ASSIGN_OR_RETURN(auto cases, dependent_schema_cases(s, ptr));
  if (cases) return *cases;
  return gen_typed(s, ptr);
}

Result<Element> SchemaCompiler::gen_if(const Json& s, const std::string& ptr) {
  Json rest = s;
  for (const char* k : {"if", "then", "else"}) rest.erase(k);
  if (!s.contains("if")) return gen(rest, ptr);
  Json yes = Json::array({rest, s["if"]});
  if (s.contains("then")) yes.push_back(s["then"]);
  Json no = Json::array({rest, Json{{"not", s["if"]}}});
  if (s.contains("else")) no.push_back(s["else"]);
  DI_ASSIGN_OR_RETURN(Element a, gen(Json{{"allOf", yes}}, ptr + "/then"));
  DI_ASSIGN_OR_RETURN(Element b, gen(Json{{"allOf", no}}, ptr + "/else"));
  return rule("if_then_else", {{a}, {b}});
}

std::optional<Element> SchemaCompiler::enum_by_validation(const Json& s) {
  Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
  if (!values.is_array()) return std::nullopt;
  InstanceValidator validator = new_validator();
  std::vector<Sequence> alts;
  for (const auto& v : values) {
    Verdict verdict = validator.validate(s, v);
    if (verdict == Verdict::kUnknown) return std::nullopt;
    if (verdict == Verdict::kValid) alts.push_back({literal_value(v)});
  }
  return rule("enum", std::move(alts));
}

std::optional<Json> SchemaCompiler::drop_simple_not(const Json& s) {
  const Json& n = s["not"];
  Json out = s;
  out.erase("not");
  if (n.is_boolean()) return n.get<bool>() ? Json(false) : out;
  if (!n.is_object() || n.contains("$ref") ||
      (has_validation_siblings(n) && !(n.contains("type") && n.size() == 1 + annotation_count(n))))
    return std::nullopt;
  if (!n.contains("type")) return Json(false);  // only annotations: matches everything
  std::set<std::string> banned;
  const Json& t = n["type"];
  if (t.is_string()) banned.insert(t.get<std::string>());
  else if (t.is_array()) for (const auto& x : t) if (x.is_string()) banned.insert(x.get<std::string>());
  if (banned.empty()) return std::nullopt;
  if (banned.count("number")) banned.insert("integer");
  std::vector<std::string> types = {"null", "boolean", "object", "array", "string", "number", "integer"};
  if (s.contains("type")) {
    types.clear();
    const Json& st = s["type"];
    if (st.is_string()) types.push_back(st.get<std::string>());
    else if (st.is_array()) for (const auto& x : st) if (x.is_string()) types.push_back(x.get<std::string>());
  }
  Json kept = Json::array();
  for (const auto& x : types) {
    if (banned.count(x)) continue;
    // "number but not integer" has no grammar here.
    if (x == "number" && banned.count("integer")) return std::nullopt;
    if (x == "integer" && std::find(types.begin(), types.end(), "number") != types.end() && !s.contains("type")) continue;
    kept.push_back(x);
  }
  if (kept.empty()) return Json(false);
  out["type"] = kept;
  return out;
}

size_t SchemaCompiler::annotation_count(const Json& s) {
  size_t n = 0;
  for (const auto& [k, v] : s.items()) n += k != "type" && !has_validation_siblings(Json{{k, v}});
  return n;
}

bool SchemaCompiler::has_validation_siblings(const Json& s) {
  static const std::set<std::string> kNote = {"$ref", "title", "description", "$comment",
      "examples", "default", "deprecated", "readOnly", "writeOnly", "$schema", "$id", "$defs",
      "definitions", "$anchor"};
  for (const auto& [k, v] : s.items())
    if (!kNote.count(k)) return true;
  return false;
}

Result<Element> SchemaCompiler::gen_union(const Json& s, const std::string& ptr) {
  bool one = s.contains("oneOf");
  if (one && s.contains("anyOf")) {
    // (A1 or ... or An) and oneOf O == (A1 and oneOf O) or ... or (An and oneOf O): an anyOf
    // whose branches each merge one A_i with the oneOf (smaller schemas, so this ends).
    if (!s["anyOf"].is_array() || s["anyOf"].empty())
      return invalid_argument("json schema: 'anyOf' at '{}' must be a non-empty array", ptr);
    Json rest = s;
    rest.erase("oneOf");
    Json branches = Json::array();
    for (const auto& a : s["anyOf"]) branches.push_back({{"allOf", Json::array({a})}, {"oneOf", s["oneOf"]}});
    rest["anyOf"] = std::move(branches);
    return gen(rest, ptr);
  }
  const char* kw = one ? "oneOf" : "anyOf";
  const Json& branches = s[kw];
  if (!branches.is_array() || branches.empty())
    return invalid_argument("json schema: '{}' at '{}' must be a non-empty array", kw, ptr);
  Json rest = s;
  rest.erase(kw);
  SchemaMerger merger = new_merger();
  std::vector<Json> merged;
  for (size_t i = 0; i < branches.size(); ++i) {
    std::string bp = fmt::format("{}/{}/{}", ptr, kw, i);
    Json combo = {{"allOf", Json::array({rest, branches[i]})}};
    DI_ASSIGN_OR_RETURN(Json m, merger.flatten(combo, bp));
    merged.push_back(std::move(m));
  }
  // oneOf: branches that may overlap another become the objects matching them and none of
  // those others (one_of.cc); refused when that cannot be written.
  std::vector<std::vector<size_t>> overlaps(merged.size());
  if (one)
    for (size_t i = 0; i < merged.size(); ++i)
      for (size_t j = 0; j < merged.size(); ++j)
        if (i != j && !merger.pairwise_disjoint({merged[i], merged[j]})) overlaps[i].push_back(j);
  // With nothing to merge in, branches go through gen() so a $ref branch stays a shared
  // (possibly recursive) rule instead of being inlined again and again.
  bool rest_trivial = !has_validation_siblings(rest);
  std::vector<Sequence> alts;
  for (size_t i = 0; i < merged.size(); ++i) {
    std::string bp = fmt::format("{}/{}/{}", ptr, kw, i);
    if (!overlaps[i].empty()) {
      // Branch i and not any branch it may overlap, every type complemented by gen_not.
      DI_ASSIGN_OR_RETURN(auto only, one_of_by_not(merged, i, overlaps[i], bp));
      if (only) {
        alts.push_back({*only});
        continue;
      }
      // Else objects and strings of branch i that no overlapping branch matches (other
      // types of the branch are left out: a sound subset); refused when neither can be
      // written.
      DI_ASSIGN_OR_RETURN(auto cases, one_of_cases(merged, i, overlaps[i]));
      DI_ASSIGN_OR_RETURN(auto strings, one_of_strings(merged, i, overlaps[i]));
      auto arrays = one_of_arrays(merged, i, overlaps[i]);
      if (!cases && !strings && !arrays)
        return unsupported("json schema: keyword 'oneOf' at '{}/oneOf' has branches that may overlap", ptr);
      if (arrays) {
        DI_ASSIGN_OR_RETURN(Element e, gen(*arrays, bp));
        alts.push_back({e});
      }
      for (const Json& c : cases.value_or(std::vector<Json>{})) {
        DI_ASSIGN_OR_RETURN(Element e, gen(c, bp));
        alts.push_back({e});
      }
      if (strings) alts.push_back({*strings});
      continue;
    }
    const Json& branch = rest_trivial ? branches[i] : merged[i];
    DI_ASSIGN_OR_RETURN(Element e, gen(branch, bp));
    alts.push_back({e});
  }
  return rule(kw, std::move(alts));
}

Result<std::optional<Element>> SchemaCompiler::one_of_by_not(const std::vector<Json>& merged,
                                                             size_t i,
                                                             const std::vector<size_t>& others,
                                                             const std::string& ptr) {
  Json negated = Json::array();
  for (size_t j : others) negated.push_back(merged[j]);
  Json only = {{"allOf", Json::array({merged[i], Json{{"not", Json{{"anyOf", negated}}}}})}};
  auto refs = ref_rules_;
  auto merges = merged_rules_;
  auto e = gen(only, ptr);
  if (e.is_ok()) return std::optional<Element>(*e);
  if (e.status().code() != StatusCode::kUnsupported) return e.status();
  ref_rules_ = std::move(refs);
  merged_rules_ = std::move(merges);
  return std::optional<Element>();
}

}  // namespace deepinfer::structured::detail
