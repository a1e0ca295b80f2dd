// Per-type lowering for the JSON Schema compiler: enum/const, numbers, strings, arrays and
// objects (keys in schema order; optional ones may be skipped).
#include <bit>
#include <cmath>

#include "deepinfer/engine/grammar/code_point_dfa.h"
#include "deepinfer/engine/grammar/json_schema_lowering.h"

namespace deepinfer::engine::grammar::detail {
namespace {

constexpr int64_t kIntClamp = 9'000'000'000'000'000'000LL;
constexpr int64_t kMaxLengthExpand = 5000;

int64_t clamp_i64(double v) {
  if (v > static_cast<double>(kIntClamp)) return kIntClamp;
  if (v < -static_cast<double>(kIntClamp)) return -kIntClamp;
  return static_cast<int64_t>(v);
}

std::optional<int64_t> get_count(const Json& s, const char* k) {
  if (!s.contains(k) || !s[k].is_number()) return std::nullopt;
  double v = s[k].get<double>();
  return v < 0 ? 0 : clamp_i64(v);
}

bool value_has_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

// Validation keywords whose effect on an enum/const value we do not check (so we refuse).
const std::set<std::string> kEnumUnchecked = {
    "pattern", "multipleOf", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
    "items", "prefixItems", "additionalItems", "properties", "required", "additionalProperties",
    "patternProperties", "minProperties", "maxProperties", "uniqueItems", "dependencies",
    "dependentRequired", "dependentSchemas"};

// An anchored pattern that is one character class repeated: `^[a-z_]+$`, `^(\\d{3,5})$`, ...
struct ClassRun {
  std::string atom;
  int64_t lo = 1, hi = 1;  // hi < 0: unbounded
};
std::optional<ClassRun> single_class_run(std::string p) {
  if (p.size() < 3 || p.front() != '^' || p.back() != '$' || p[p.size() - 2] == '\\') return std::nullopt;
  p = p.substr(1, p.size() - 2);
  for (const char* open : {"(?:", "("})
    if (p.rfind(open, 0) == 0 && p.back() == ')') {
      p = p.substr(std::string(open).size(), p.size() - std::string(open).size() - 1);
      break;
    }
  size_t i = 0;
  if (p.empty()) return std::nullopt;
  if (p[0] == '[') {
    i = 1;
    if (i < p.size() && p[i] == '^') ++i;
    if (i < p.size() && p[i] == ']') ++i;
    for (; i < p.size() && p[i] != ']'; ++i) {
      if (p[i] == '\\') ++i;
      else if (p[i] == '[') return std::nullopt;  // nested or POSIX-style classes
    }
    if (i >= p.size()) return std::nullopt;
    ++i;
  } else if (p[0] == '\\' && p.size() >= 2 && std::string("dDwWsS").find(p[1]) != std::string::npos) {
    i = 2;
  } else if (p[0] == '.') {
    i = 1;
  } else {
    return std::nullopt;
  }
  ClassRun run;
  run.atom = p.substr(0, i);
  std::string q = p.substr(i);
  if (q == "+") { run.lo = 1; run.hi = -1; }
  else if (q == "*") { run.lo = 0; run.hi = -1; }
  else if (q == "?") { run.lo = 0; run.hi = 1; }
  else if (q.empty()) { run.lo = run.hi = 1; }
  else if (q.size() >= 3 && q.front() == '{' && q.back() == '}') {
    std::string body = q.substr(1, q.size() - 2);
    size_t comma = body.find(',');
    auto num = [](const std::string& t) -> std::optional<int64_t> {
      if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      return std::stoll(t);
    };
    auto a = num(body.substr(0, comma));
    if (!a) return std::nullopt;
    run.lo = *a;
    if (comma == std::string::npos) run.hi = *a;
    else if (comma + 1 == body.size()) run.hi = -1;
    else if (auto z = num(body.substr(comma + 1))) run.hi = *z;
    else return std::nullopt;
  } else {
    return std::nullopt;
  }
  return run;
}

}  // namespace

bool spec_defined_format(const std::string& f) {
  static const std::set<std::string> kSpec = {
      "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
      "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
      "json-pointer", "relative-json-pointer", "regex"};
  return kSpec.count(f) > 0;
}

namespace {

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

constexpr double kMaxMultipleOf = 1000;

// d when v is exactly 10^-d (d in 1..9) as written in the schema.
std::optional<int> decimal_places(double v) {
  double p = 1;
  for (int d = 1; d <= 9; ++d) {
    p *= 10;
    if (std::abs(v * p - 1.0) < 1e-9) return d;
  }
  return std::nullopt;
}

ByteSet digit_set() {
  ByteSet s;
  s.set_range('0', '9');
  return s;
}

}  // namespace

// The strings matching the pattern (search semantics) and the format (whole string) with
// between lo and hi code points (hi < 0: unbounded), as one automaton.
Result<CodePointDfa> string_automaton(const std::optional<std::string>& pattern,
                                      const std::optional<std::string>& format, int64_t lo, int64_t hi) {
  std::vector<CodePointDfa> parts;
  if (pattern) {
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(*pattern, /*search=*/true));
    parts.push_back(std::move(d));
  }
  if (format) {
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(*format, /*search=*/false));
    parts.push_back(std::move(d));
  }
  CodePointDfa lang = parts[0];
  if (parts.size() == 2) {
    DI_ASSIGN_OR_RETURN(lang, dfa_product({&parts[0], &parts[1]}, [](const std::vector<bool>& a) {
      return a[0] && a[1];
    }));
  }
  // Bounds the language already meets are dropped (`^[0-9]{5}$` with maxLength 5).
  auto [shortest, longest] = dfa_length_range(lang);
  if (shortest >= lo) lo = 0;
  if (hi >= 0 && longest >= 0 && longest <= hi) hi = -1;
  if (lo > 0 || hi >= 0) {
    if (lo > kMaxLengthExpand) return unsupported("minLength {} is above {}", lo, kMaxLengthExpand);
    auto bounded = dfa_with_length(lang, lo, hi);
    if (!bounded.is_ok() && hi > lo) {
      // Past the state cap, maxLength is tightened to the largest bound that fits: fewer
      // strings, all still valid (as maxLength above 5000 is capped elsewhere).
      int64_t good = -1, a = lo, z = hi - 1;
      while (a <= z) {
        int64_t mid = a + (z - a) / 2;
        auto t = dfa_with_length(lang, lo, mid);
        if (t.is_ok() && !dfa_is_empty(*t)) { good = mid; bounded = std::move(t); a = mid + 1; }
        else z = mid - 1;
      }
      if (good < 0) return bounded.status();
    }
    if (!bounded.is_ok()) return bounded.status();
    lang = std::move(*bounded);
  }
  return lang;
}

Result<Element> SchemaCompiler::gen_typed(const Json& s, const std::string& ptr) {
  static const std::vector<std::string> kAll = {"null", "boolean", "object", "array", "string", "number"};
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array()) for (const auto& x : t) if (x.is_string()) types.push_back(x.get<std::string>());
    for (const auto& x : types)
      if (x != "integer" && std::find(kAll.begin(), kAll.end(), x) == kAll.end())
        return invalid_argument("json schema: unknown type '{}' at '{}/type'", x, ptr);
    if (types.empty()) return invalid_argument("json schema: 'type' at '{}/type' is empty or malformed", ptr);
  } else {
    types = kAll;
  }
  bool has_number = std::find(types.begin(), types.end(), "number") != types.end();

  if (s.contains("const") || s.contains("enum")) {
    Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    if (!values.is_array()) return invalid_argument("json schema: 'enum' at '{}/enum' is not an array", ptr);
    if (s.contains("const") && s.contains("enum")) {  // both hold: the const, if listed
      bool listed = values.is_array() && s["enum"].is_array() &&
                    std::find(s["enum"].begin(), s["enum"].end(), s["const"]) != s["enum"].end();
      if (!listed) return never();
    }
    std::vector<Sequence> alts;
    for (const auto& v : values) {
      bool ok = false;
      for (const auto& t : types) ok = ok || value_has_type(v, t);
      if (!ok) continue;
      // Other constraints on the value must hold too; we check the simple ones and refuse the rest.
      for (const auto& [k, kv] : s.items()) {
        bool string_kw = k == "minLength" || k == "maxLength";
        bool num_kw = k == "minimum" || k == "maximum";
        if (string_kw && v.is_string() && kv.is_number()) {
          size_t n = utf8_length(v.get<std::string>());
          if ((k == "minLength" && n < kv.get<double>()) || (k == "maxLength" && n > kv.get<double>())) ok = false;
        } else if (num_kw && v.is_number() && kv.is_number()) {
          if ((k == "minimum" && v.get<double>() < kv.get<double>()) ||
              (k == "maximum" && v.get<double>() > kv.get<double>())) ok = false;
        } else if (kEnumUnchecked.count(k)) {
          return unsupported("json schema: keyword '{}' at '{}/{}' combined with enum/const", k, ptr, k);
        }
      }
      if (ok) alts.push_back({literal_value(v)});
    }
    return rule("enum", std::move(alts));
  }

  std::vector<Sequence> alts;
  for (const auto& t : types) {
    if (t == "null") alts.push_back(lit("null"));
    else if (t == "boolean") { alts.push_back(lit("true")); alts.push_back(lit("false")); }
    else if (t == "string") { DI_ASSIGN_OR_RETURN(Element e, gen_string(s, ptr)); alts.push_back({e}); }
    else if (t == "number") { DI_ASSIGN_OR_RETURN(Element e, gen_number(s, ptr, false)); alts.push_back({e}); }
    else if (t == "integer" && !has_number) { DI_ASSIGN_OR_RETURN(Element e, gen_number(s, ptr, true)); alts.push_back({e}); }
    else if (t == "array") { DI_ASSIGN_OR_RETURN(Element e, gen_array(s, ptr)); alts.push_back({e}); }
    else if (t == "object") { DI_ASSIGN_OR_RETURN(Element e, gen_object(s, ptr)); alts.push_back({e}); }
  }
  return rule("typed", std::move(alts));
}

Result<Element> SchemaCompiler::gen_number(const Json& s, const std::string& ptr, bool integer,
                                           const std::set<int64_t>* excluded) {
  bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                 s.contains("exclusiveMaximum");
  if (s.contains("multipleOf")) {
    const Json& m = s["multipleOf"];
    auto refuse = [&] {
      return unsupported("json schema: keyword 'multipleOf' at '{}/multipleOf' is supported only as 1, "
                         "an integer without bounds, or 10^-d on unbounded numbers", ptr);
    };
    if (!m.is_number() || m.get<double>() <= 0) return refuse();
    const double v = m.get<double>();
    if (v == 1.0) {
      integer = true;
    } else if (v == std::floor(v) && v <= kMaxMultipleOf) {
      if (bounded) return refuse();
      return integer_multiple_of(static_cast<int>(v));  // integers only: a sound subset for numbers
    } else if (auto d = decimal_places(v)) {
      // Every integer is a multiple of 10^-d; a number is one iff it has at most d decimals.
      if (!integer) {
        if (bounded) return refuse();
        Element frac = b_.optional(cat({lit("."), {b_.repeat({b_.bytes(digit_set())}, 1, *d, "frac_digit")}}), "frac");
        return rule("decimal", {{any_integer(b_), frac}});
      }
    } else {
      return refuse();
    }
  }
  // Bounds are tightened to integers: a sound subset when a bound is fractional or huge.
  std::optional<int64_t> lo, hi;
  bool lo_ex = false, hi_ex = false;
  auto num = [&](const char* k) -> std::optional<double> {
    if (s.contains(k) && s[k].is_number()) return s[k].get<double>();
    return std::nullopt;
  };
  auto raise_lo = [&](double v, bool ex) {
    double c = std::ceil(v);
    bool e = ex && c == v;
    int64_t iv = clamp_i64(c);
    if (!lo || iv > *lo || (iv == *lo && e)) { lo = iv; lo_ex = e; }
  };
  auto lower_hi = [&](double v, bool ex) {
    double f = std::floor(v);
    bool e = ex && f == v;
    int64_t iv = clamp_i64(f);
    if (!hi || iv < *hi || (iv == *hi && e)) { hi = iv; hi_ex = e; }
  };
  bool draft4_ex_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                       s["exclusiveMinimum"].get<bool>();
  bool draft4_ex_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                       s["exclusiveMaximum"].get<bool>();
  if (auto v = num("minimum")) raise_lo(*v, draft4_ex_min);
  if (auto v = num("exclusiveMinimum")) raise_lo(*v, true);
  if (auto v = num("maximum")) lower_hi(*v, draft4_ex_max);
  if (auto v = num("exclusiveMaximum")) lower_hi(*v, true);
  if (integer && excluded && !excluded->empty()) {
    // The range minus single values: the pieces between them.
    if (lo && lo_ex) *lo += 1;
    if (hi && hi_ex) *hi -= 1;
    std::vector<Sequence> pieces;
    std::optional<int64_t> from = lo;
    for (int64_t x : *excluded) {
      if ((lo && x < *lo) || (hi && x > *hi)) continue;
      if (!from || *from <= x - 1) pieces.push_back({integer_range(b_, from, x - 1)});
      from = x + 1;
    }
    if (!from || !hi || *from <= *hi) pieces.push_back({integer_range(b_, from, hi)});
    return rule("integer_except", std::move(pieces));
  }
  if (!lo && !hi) return integer ? any_integer(b_) : any_number(b_);
  if (integer) {
    if (lo && lo_ex) *lo += 1;
    if (hi && hi_ex) *hi -= 1;
    if (lo && hi && *lo > *hi) return never();
    return integer_range(b_, lo, hi);
  }
  if (lo && hi && (*lo > *hi || (*lo == *hi && (lo_ex || hi_ex)))) return never();
  return number_range(b_, lo, hi, lo_ex, hi_ex);
}

Result<std::optional<Element>> SchemaCompiler::unique_array(const Json& items, int64_t min, int64_t max) {
  constexpr size_t kMaxUniqueDomain = 8;
  // The finite item domain: enum/const values (validated against the item schema), or the
  // literals of boolean/null-only types.
  std::vector<Json> domain;
  if (items.is_object() && (items.contains("enum") || items.contains("const"))) {
    Json values = items.contains("const") ? Json::array({items["const"]}) : items["enum"];
    if (!values.is_array()) return std::optional<Element>();
    InstanceValidator validator(root_, o_.enforce_formats);
    for (const auto& v : values) {
      Verdict verdict = validator.validate(items, v);
      if (verdict == Verdict::kUnknown) return std::optional<Element>();
      bool dup = false;
      for (const auto& d : domain) dup = dup || d == v;
      if (verdict == Verdict::kValid && !dup) domain.push_back(v);
    }
  } else if (items.is_object() && items.contains("type") && items.size() == 1) {
    std::vector<std::string> types;
    if (items["type"].is_string()) types.push_back(items["type"].get<std::string>());
    else if (items["type"].is_array()) for (const auto& t : items["type"]) if (t.is_string()) types.push_back(t.get<std::string>());
    for (const auto& t : types) {
      if (t == "boolean") { domain.push_back(true); domain.push_back(false); }
      else if (t == "null") domain.push_back(nullptr);
      else return std::optional<Element>();
    }
  } else {
    return std::optional<Element>();
  }
  if (domain.size() > kMaxUniqueDomain) return std::optional<Element>();
  const int64_t hi = max < 0 ? static_cast<int64_t>(domain.size()) : std::min<int64_t>(max, domain.size());
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
        if (!(done & (1u << i))) alts.push_back(cat({sep, {literal_value(domain[i]), after(done | (1u << i))}}));
    if (n >= min) alts.push_back(cat({ws_, lit("]")}));
    Element e = rule("unique_items", std::move(alts));
    memo.emplace(done, e);
    return e;
  };
  std::vector<Sequence> alts;
  if (hi > 0)
    for (size_t i = 0; i < domain.size(); ++i) alts.push_back(cat({lit("["), ws_, {literal_value(domain[i]), after(1u << i)}}));
  if (min == 0) alts.push_back(cat({lit("["), ws_, lit("]")}));
  return std::optional<Element>(rule("unique_array", std::move(alts)));
}

// Integers divisible by k: the digits run an automaton over the remainder mod k.
Element SchemaCompiler::integer_multiple_of(int k) {
  std::vector<uint32_t> rem(k);
  for (int r = 0; r < k; ++r) rem[r] = b_.new_rule("mod");
  for (int r = 0; r < k; ++r) {
    std::map<int, ByteSet> by_target;
    for (int d = 0; d <= 9; ++d) by_target[(10 * r + d) % k].set(static_cast<uint8_t>('0' + d));
    for (const auto& [t, set] : by_target) b_.add_alt(rem[r], {b_.bytes(set), GrammarBuilder::call(rem[t])});
    if (r == 0) b_.add_alt(rem[r], {});
  }
  uint32_t digits = b_.new_rule("multiple");
  for (int d = 1; d <= 9; ++d)
    b_.add_alt(digits, {b_.byte(static_cast<uint8_t>('0' + d)), GrammarBuilder::call(rem[d % k])});
  b_.add_alt(digits, lit("0"));
  return rule("multiple_of", {{b_.optional(lit("-"), "sign"), GrammarBuilder::call(digits)}});
}

Result<Element> SchemaCompiler::gen_string(const Json& s, const std::string& ptr) {
  auto min = get_count(s, "minLength");
  auto max = get_count(s, "maxLength");
  std::optional<std::string> pattern, format;
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return invalid_argument("json schema: pattern at '{}' is not a string", ptr);
    pattern = s["pattern"].get<std::string>();
  }
  if (o_.enforce_formats && s.contains("format") && s["format"].is_string()) {
    // A format the 2020-12 spec defines is enforced or refused; any other name ("byte",
    // "path", ...) has no defined meaning, so validators (and we) treat it as an annotation.
    const std::string f = s["format"].get<std::string>();
    if (!format_regex(f) && spec_defined_format(f))
      return unsupported("json schema: format '{}' at '{}/format' is not supported", f, ptr);
    format = format_regex(f);
  }
  if (pattern && !format && (min || max)) {
    // `^C*$`-like patterns (one character class, repeated) meet length bounds exactly as
    // C{lo,hi}, a counted run whose precompute is cheap; other patterns go to the automaton.
    if (auto run = single_class_run(*pattern)) {
      int64_t lo = std::max<int64_t>(run->lo, min.value_or(0));
      int64_t hi = run->hi < 0 ? max.value_or(-1) : (max ? std::min<int64_t>(run->hi, *max) : run->hi);
      if (hi >= 0 && hi < lo) return never();
      if (lo > kMaxLengthExpand) return unsupported("json schema: minLength {} at '{}' is above {}", lo, ptr, kMaxLengthExpand);
      if (hi > kMaxLengthExpand) hi = std::max(lo, kMaxLengthExpand);  // sound: fewer strings
      pattern = fmt::format("^{}{{{},{}}}$", run->atom, lo, hi < 0 ? std::string() : std::to_string(hi));
      min.reset();
      max.reset();
    }
  }
  if ((pattern || format) && (min || max || (pattern && format))) {
    // Several constraints on one string: intersect their automata (exact), then lower.
    auto lang = string_automaton(pattern, format, min.value_or(0), max.value_or(-1));
    if (!lang.is_ok())
      return Status(lang.status().code(), fmt::format("json schema: string constraints at '{}' "
                                                      "(pattern/format/length): {}", ptr, lang.status().message()));
    return rule("pattern_string", {cat({lit("\""), {dfa_to_rule(b_, *lang, true, "str_dfa")}, lit("\"")})});
  }
  if (pattern || format) {
    std::string where = ptr + (pattern ? "/pattern" : "/format");
    auto e = compile_regex(b_, pattern ? *pattern : *format, RegexOptions{.json_string = true, .search = pattern.has_value()});
    if (!e.is_ok())
      return Status(e.status().code(), fmt::format("{} (at '{}')", e.status().message(), where));
    return rule("pattern_string", {cat({lit("\""), {*e}, lit("\"")})});
  }
  if (!min && !max) return any_string();
  int64_t lo = min.value_or(0);
  int64_t hi = max ? std::min<int64_t>(*max, std::max<int64_t>(lo, kMaxLengthExpand)) : -1;
  if (lo > kMaxLengthExpand)
    return unsupported("json schema: minLength {} at '{}' is above {}", lo, ptr, kMaxLengthExpand);
  if (hi >= 0 && hi < lo) return never();
  Element body = b_.repeat({json_string_char(b_)}, lo, hi, "str_len");
  return rule("string_len", {cat({lit("\""), {body}, lit("\"")})});
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
    if (s.contains("items")) { items = &s["items"]; items_ptr = ptr + "/items"; }
  } else if (s.contains("items") && s["items"].is_array()) {  // draft 4-2019 tuple form
    for (size_t i = 0; i < s["items"].size(); ++i) {
      prefix.push_back(&s["items"][i]);
      prefix_ptr.push_back(fmt::format("{}/items/{}", ptr, i));
    }
    if (s.contains("additionalItems")) { items = &s["additionalItems"]; items_ptr = ptr + "/additionalItems"; }
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
  if (min > kMaxLengthExpand) return unsupported("json schema: minItems {} at '{}' is too large", min, ptr);
  if (max > kMaxLengthExpand) max = std::max(min, kMaxLengthExpand);
  if (s.contains("uniqueItems") && s["uniqueItems"] == true && (max < 0 || max > 1)) {
    // Exact when the items come from a small finite set; otherwise arrays of at most one item
    // (trivially unique: a sound subset), refused when minItems asks for more.
    if (prefix.empty()) {
      DI_ASSIGN_OR_RETURN(auto exact, unique_array(*items, min, max));
      if (exact) return *exact;
    }
    if (min > 1 || np > 1)
      return unsupported("json schema: keyword 'uniqueItems' at '{}/uniqueItems' is supported only for "
                         "small enum item sets or at most one item", ptr);
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

}  // namespace deepinfer::engine::grammar::detail
