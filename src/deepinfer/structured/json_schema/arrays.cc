// Array lowering for the JSON Schema compiler: prefix items, counted items and uniqueItems.
#include <bit>

#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured::detail {

Result<std::optional<Element>> SchemaCompiler::unique_array(const Json& items, int64_t min,
                                                            int64_t max) {
  constexpr size_t kMaxUniqueDomain = 8;
  // The finite item domain: enum/const values (validated against the item schema), or the
  // literals of boolean/null-only types.
  std::vector<Json> domain;
  if (items.is_object() && (items.contains("enum") || items.contains("const"))) {
    Json values = items.contains("const") ? Json::array({items["const"]}) : items["enum"];
    if (!values.is_array()) return std::optional<Element>();
    InstanceValidator validator = new_validator();
    for (const auto& v : values) {
      Verdict verdict = validator.validate(items, v);
      if (verdict == Verdict::kUnknown) return std::optional<Element>();
      bool dup = false;
      for (const auto& d : domain) dup = dup || d == v;
      if (verdict == Verdict::kValid && !dup) domain.push_back(v);
    }
  } else if (items.is_object() && items.contains("type") && items.size() == 1) {
    std::vector<std::string> types;
    if (items["type"].is_string())
      types.push_back(items["type"].get<std::string>());
    else if (items["type"].is_array())
      for (const auto& t : items["type"])
        if (t.is_string()) types.push_back(t.get<std::string>());
    for (const auto& t : types) {
      if (t == "boolean") {
        domain.push_back(true);
        domain.push_back(false);
      } else if (t == "null")
        domain.push_back(nullptr);
      else
        return std::optional<Element>();
    }
  } else {
    return std::optional<Element>();
  }
  if (domain.size() > kMaxUniqueDomain) return std::optional<Element>();
  const int64_t hi =
      max < 0 ? static_cast<int64_t>(domain.size()) : std::min<int64_t>(max, domain.size());
  if (min > hi) return std::optional<Element>(never());
  Sequence sep = cat({ws_, lit(","), ws_});
  std::map<uint32_t, Element> memo;
  // after(done): the rest of the array once the values in `done` were written (>= 1 of them).
  std::function<Element(uint32_t)> after = [&](uint32_t done) -> Element {
    if (auto it = memo.find(done); it != memo.end()) return it->second;
    const int64_t n = std::popcount(done);
    std::vector<Sequence> alts;
    if (n < hi)
      for (size_t i = 0; i < domain.size(); ++i)
        if (!(done & (1u << i)))
          alts.push_back(cat({sep, {literal_value(domain[i]), after(done | (1u << i))}}));
    if (n >= min) alts.push_back(cat({ws_, lit("]")}));
    Element e = rule("unique_items", std::move(alts));
    memo.emplace(done, e);
    return e;
  };
  std::vector<Sequence> alts;
  if (hi > 0)
    for (size_t i = 0; i < domain.size(); ++i)
      alts.push_back(cat({lit("["), ws_, {literal_value(domain[i]), after(1u << i)}}));
  if (min == 0) alts.push_back(cat({lit("["), ws_, lit("]")}));
  return std::optional<Element>(rule("unique_array", std::move(alts)));
}

Result<Element> SchemaCompiler::gen_array(const Json& s, const std::string& ptr) {
  std::vector<const Json*> prefix;
  std::vector<std::string> prefix_ptr;
  const Json* items = nullptr;
  std::string items_ptr;
  Json any = true;
  if (s.contains("prefixItems") && s["prefixItems"].is_array()) {
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      prefix.push_back(&s["prefixItems"][i]);
      prefix_ptr.push_back(fmt::format("{}/prefixItems/{}", ptr, i));
    }
    if (s.contains("items")) {
      items = &s["items"];
      items_ptr = ptr + "/items";
    }
  } else if (s.contains("items") && s["items"].is_array()) {  // draft 4-2019 tuple form
    for (size_t i = 0; i < s["items"].size(); ++i) {
      prefix.push_back(&s["items"][i]);
      prefix_ptr.push_back(fmt::format("{}/items/{}", ptr, i));
    }
    if (s.contains("additionalItems")) {
      items = &s["additionalItems"];
      items_ptr = ptr + "/additionalItems";
    }
  } else if (s.contains("items")) {
    items = &s["items"];
    items_ptr = ptr + "/items";
  }
  if (!items) items = &any;
  int64_t min = get_count(s, "minItems").value_or(0);
  int64_t max = get_count(s, "maxItems").value_or(-1);
  int64_t np = static_cast<int64_t>(prefix.size());
  if (items->is_boolean() && !items->get<bool>()) max = max < 0 ? np : std::min(max, np);
  if (max >= 0 && min > max) return never();
  if (min > kMaxLengthExpand)
    return unsupported("json schema: minItems {} at '{}' is too large", min, ptr);
  if (max > kMaxLengthExpand) max = std::max(min, kMaxLengthExpand);
  if (s.contains("contains")) {
    if (!prefix.empty() || (s.contains("uniqueItems") && s["uniqueItems"] == true))
      return unsupported(
          "json schema: keyword 'contains' at '{}/contains' is supported only "
          "without prefixItems and uniqueItems",
          ptr);
    return contains_array(s, *items, min, max, ptr);
  }
  if (s.contains("uniqueItems") && s["uniqueItems"] == true && (max < 0 || max > 1)) {
    // Exact when the items come from a small finite set; otherwise arrays of at most one item
    // (trivially unique: a sound subset), refused when minItems asks for more.
    if (prefix.empty()) {
      DI_ASSIGN_OR_RETURN(auto exact, unique_array(*items, min, max));
      if (exact) return *exact;
    }
    if (min > 1 || np > 1)
      return unsupported(
          "json schema: keyword 'uniqueItems' at '{}/uniqueItems' is supported only for "
          "small enum item sets or at most one item",
          ptr);
    max = 1;
  }

  std::vector<Element> elems;
  for (int64_t i = 0; i < np && (max < 0 || i < max); ++i) {
    DI_ASSIGN_OR_RETURN(Element e, gen(*prefix[i], prefix_ptr[i]));
    elems.push_back(e);
  }
  std::optional<Element> item;
  if (max < 0 || max > np) {
    DI_ASSIGN_OR_RETURN(Element e, gen(*items, items_ptr));
    item = e;
  }
  Sequence sep = cat({ws_, lit(","), ws_});
  // rest(k): elements k.. each preceded by a comma; optional once k >= minItems.
  auto element_at = [&](int64_t k) { return k < np ? elems[k] : *item; };
  std::function<Sequence(int64_t)> rest = [&](int64_t k) -> Sequence {
    if (max >= 0 && k >= max) return {};
    if (k >= np) {
      int64_t lo = std::max<int64_t>(0, min - k);
      int64_t hi = max < 0 ? -1 : max - k;
      return {b_.repeat(cat({sep, {*item}}), lo, hi, "items_rep")};
    }
    Sequence body = cat({sep, {element_at(k)}, rest(k + 1)});
    if (k >= min) return {b_.optional(body, "item_opt")};
    return {rule("item", {body})};
  };
  if (max == 0) return rule("array", {cat({lit("["), ws_, lit("]")})});
  Sequence list = cat({{element_at(0)}, rest(1)});
  std::vector<Sequence> alts = {cat({lit("["), ws_, list, ws_, lit("]")})};
  if (min == 0) alts.push_back(cat({lit("["), ws_, lit("]")}));
  return rule("array", std::move(alts));
}

// "[" T,...,T, U, T,...,T "]" with U = items and contains: the array holds at least one item
// matching `contains`, and the grammar may place that item anywhere (ambiguity is harmless to
// the matcher). With item bounds, one alternative per number k of items before U (k < K),
// the last one open-ended when maxItems is absent.
Result<Element> SchemaCompiler::contains_array(const Json& s, const Json& items, int64_t min,
                                               int64_t max, const std::string& ptr) {
  constexpr int64_t kMaxContainsSplit = 32;
  if (max == 0) return never();
  if (s["contains"].is_array()) return contains_all(s["contains"], items, min, max, ptr);
  const int64_t last = max < 0 ? std::max<int64_t>(min - 1, 0) : max - 1;
  if (last > kMaxContainsSplit)
    return unsupported(
        "json schema: keyword 'contains' at '{}/contains' with item bounds above "
        "{}",
        ptr, kMaxContainsSplit);
  DI_ASSIGN_OR_RETURN(Element t, gen(items, ptr + "/items"));
  DI_ASSIGN_OR_RETURN(Element u,
                      gen(Json{{"allOf", Json::array({items, s["contains"]})}}, ptr + "/contains"));
  Sequence sep = cat({ws_, lit(","), ws_});
  std::vector<Sequence> alts;
  for (int64_t k = 0; k <= last; ++k) {
    bool open = max < 0 && k == last;  // k or more items before U
    int64_t lo = std::max<int64_t>(0, min - 1 - k), hi = max < 0 ? -1 : max - 1 - k;
    Sequence before = {b_.repeat(cat({{t}, sep}), k, open ? -1 : k, "items_before")};
    Sequence after = {b_.repeat(cat({sep, {t}}), open ? 0 : lo, hi, "items_after")};
    alts.push_back(cat({lit("["), ws_, before, {u}, after, ws_, lit("]")}));
  }
  return rule("contains_array", std::move(alts));
}

// Several `contains` (the allOf merge's list): after(D, k) is the rest of the array once the
// items so far (k of them, counted up to the bound that matters) matched the contains in the
// set D. Each next item is an `items` one, or one also matching the contains in some set T
// (allOf items and those): exact, since an item matching more can take any smaller T.
Result<Element> SchemaCompiler::contains_all(const Json& list, const Json& items, int64_t min,
                                             int64_t max, const std::string& ptr) {
  constexpr size_t kMaxContainsList = 3;
  constexpr int64_t kMaxContainsCount = 32;
  const std::string cp = ptr + "/contains";
  if (list.empty()) return invalid_argument("json schema: 'contains' at '{}' is not a schema", cp);
  if (list.size() > kMaxContainsList)
    return unsupported(
        "json schema: keyword 'contains' at '{}': more than {} contains in one array", cp,
        kMaxContainsList);
  const int64_t cap = max < 0 ? min : max;  // counts past it behave alike
  if (cap > kMaxContainsCount)
    return unsupported("json schema: keyword 'contains' at '{}' with item bounds above {}", cp,
                       kMaxContainsCount);
  const uint32_t full = (1u << list.size()) - 1;
  DI_ASSIGN_OR_RETURN(Element t, gen(items, ptr + "/items"));
  std::vector<Element> u(full + 1, t);  // [2^n] items also matching the contains in the set
  for (uint32_t set = 1; set <= full; ++set) {
    Json all = Json::array({items});
    for (size_t i = 0; i < list.size(); ++i)
      if (set & (1u << i)) all.push_back(list[i]);
    DI_ASSIGN_OR_RETURN(u[set], gen(Json{{"allOf", all}}, cp));
  }
  Sequence sep = cat({ws_, lit(","), ws_});
  std::map<std::pair<uint32_t, int64_t>, uint32_t> memo;
  // The next item (after `lead`) and what follows it, from state (done, k).
  std::function<std::vector<Sequence>(uint32_t, int64_t, const Sequence&)> next_items;
  std::function<Element(uint32_t, int64_t)> after = [&](uint32_t done, int64_t k) -> Element {
    if (auto it = memo.find({done, k}); it != memo.end()) return GrammarBuilder::call(it->second);
    uint32_t r = b_.new_rule("contains_rest");
    memo[{done, k}] = r;
    for (Sequence& alt : next_items(done, k, sep)) b_.add_alt(r, std::move(alt));
    if (done == full && k >= min) b_.add_alt(r, cat({ws_, lit("]")}));
    return GrammarBuilder::call(r);
  };
  next_items = [&](uint32_t done, int64_t k, const Sequence& lead) {
    std::vector<Sequence> alts;
    if (max >= 0 && k >= max) return alts;
    const int64_t k1 = std::min(k + 1, cap);
    alts.push_back(cat({lead, {t, after(done, k1)}}));
    for (uint32_t set = 1; set <= full; ++set)
      if ((set & ~done) != 0) alts.push_back(cat({lead, {u[set], after(done | set, k1)}}));
    return alts;
  };
  return rule("contains_all_array", next_items(0, 0, cat({lit("["), ws_})));
}

}  // namespace deepinfer::structured::detail
