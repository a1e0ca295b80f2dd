// Per-type lowering for the JSON Schema compiler: type dispatch, enum/const and numbers
// (strings, arrays and objects have their own files).
#include <cmath>
#include <numeric>

#include "deepinfer/structured/json_schema/schema_compiler.h"
#include "deepinfer/structured/json_schema/validate.h"

namespace deepinfer::structured::detail {
namespace {

// Validation keywords whose effect on an enum/const value we do not check (so we refuse).
const std::set<std::string> kEnumUnchecked = {
    "pattern", "multipleOf", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
    "items", "prefixItems", "additionalItems", "properties", "required", "additionalProperties",
    "patternProperties", "minProperties", "maxProperties", "uniqueItems", "dependencies",
    "dependentRequired", "dependentSchemas"};

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

// For a step v = p/10^k (k <= 6) that a double holds exactly (v * 2^30 is an integer), the
// integer whose multiples are the integer multiples of v: p / gcd(p, 10^k); else nullopt.
std::optional<int64_t> exact_decimal_step_integer(double v) {
  const double scaled = std::ldexp(v, 30);
  if (!(v > 0) || scaled != std::floor(scaled) || v > kMaxMultipleOf) return std::nullopt;
  int64_t ten = 1;
  for (int k = 1; k <= 6; ++k) {
    ten *= 10;
    const double p = std::round(v * static_cast<double>(ten));
    if (static_cast<double>(p) / static_cast<double>(ten) != v) continue;
    const auto pi = static_cast<int64_t>(p);
    const int64_t n = pi / std::gcd(pi, ten);
    if (n > kMaxMultipleOf) return std::nullopt;
    return n;
  }
  return std::nullopt;
}

ByteSet digit_set() {
  ByteSet s;
  s.set_range('0', '9');
  return s;
}

}  // namespace

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
  int fraction_digits = -1;  // multipleOf 10^-d with bounds
  bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                 s.contains("exclusiveMaximum");
  if (s.contains("multipleOf")) {
    const Json& m = s["multipleOf"];
    auto refuse = [&] {
      return unsupported("json schema: keyword 'multipleOf' at '{}/multipleOf' is supported only as 1, "
                         "10^-d, an integer, or a decimal step a double holds exactly (such as 0.25); "
                         "not with these bounds or this step", ptr);
    };
    if (!m.is_number() || m.get<double>() <= 0) return refuse();
    const double v = m.get<double>();
    if (v == 1.0) {
      integer = true;
    } else if (v == std::floor(v) && v <= kMaxMultipleOf) {
      if (bounded) {
        if (auto e = enumerated_multiples(s, v, integer)) return *e;
        // Only a lower bound <= 0: the non-negative multiples (negative ones left out).
        bool upper = s.contains("maximum") || s.contains("exclusiveMaximum");
        std::optional<double> lo;
        bool lo_ex = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number();
        if (lo_ex) lo = s["exclusiveMinimum"].get<double>();
        if (s.contains("minimum") && s["minimum"].is_number()) {
          double x = s["minimum"].get<double>();
          if (!lo || x > *lo) {
            lo = x;
            lo_ex = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true;
          }
        }
        if (upper || !lo || *lo > 0) {
          // The integers between the bounds with the remainders they need, as an automaton
          // (residues.cc); non-integers are left out (a sound subset).
          DI_ASSIGN_OR_RETURN(auto e, residue_number(s, ptr, /*plain=*/true));
          if (e) return *e;
          return refuse();
        }
        return integer_multiple_of(static_cast<int>(v), false, *lo < 0 || !lo_ex);
      }
      return integer_multiple_of(static_cast<int>(v));  // integers only: a sound subset for numbers
    } else if (auto d = decimal_places(v)) {
      // Every integer is a multiple of 10^-d; a number is one iff it has at most d decimals.
      if (!integer && bounded) {
        fraction_digits = *d;
      } else if (!integer) {
        Element frac = b_.optional(cat({lit("."), {b_.repeat({b_.bytes(digit_set())}, 1, *d, "frac_digit")}}), "frac");
        return rule("decimal", {{any_integer(b_), frac}});
      }
    } else {
      if (bounded)
        if (auto e = enumerated_multiples(s, v, integer)) return *e;
      // A step p/10^k that a double holds exactly (0.5, 0.25, 2.5, 0.125): its integer
      // multiples are the multiples of the integer p / gcd(p, 10^k), and n / step is then an
      // exact integer in double arithmetic too, so no validator disagrees. Non-integers are
      // left out (a sound subset). Other steps (0.3) are refused.
      if (auto k = exact_decimal_step_integer(v)) {
        Json t = s;
        t["multipleOf"] = *k;
        return gen_number(t, ptr, true, excluded);
      }
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
  if (!lo && !hi && fraction_digits >= 0) return number_range(b_, lo, hi, false, false, fraction_digits);
  if (!lo && !hi) return integer ? any_integer(b_) : any_number(b_);
  if (integer) {
    if (lo && lo_ex) *lo += 1;
    if (hi && hi_ex) *hi -= 1;
    if (lo && hi && *lo > *hi) return never();
    return integer_range(b_, lo, hi);
  }
  if (lo && hi && (*lo > *hi || (*lo == *hi && (lo_ex || hi_ex)))) return never();
  return number_range(b_, lo, hi, lo_ex, hi_ex, fraction_digits);
}

// Integers divisible by k: the digits run an automaton over the remainder mod k.
std::optional<Element> SchemaCompiler::enumerated_multiples(const Json& s, double m, bool integer) {
  constexpr int64_t kMaxEnumeratedMultiples = 1000;
  auto num = [&](const char* k) -> std::optional<double> {
    if (s.contains(k) && s[k].is_number()) return s[k].get<double>();
    return std::nullopt;
  };
  auto flag = [&](const char* k) { return s.contains(k) && s[k] == true; };
  // The tightest bound on each side and whether it is exclusive.
  std::optional<double> lo = num("minimum"), hi = num("maximum");
  bool lo_ex = lo && flag("exclusiveMinimum"), hi_ex = hi && flag("exclusiveMaximum");
  if (auto x = num("exclusiveMinimum"); x && (!lo || *x >= *lo)) lo = *x, lo_ex = true;
  if (auto x = num("exclusiveMaximum"); x && (!hi || *x <= *hi)) hi = *x, hi_ex = true;
  if (!lo || !hi || std::abs(*lo) > 1e15 || std::abs(*hi) > 1e15) return std::nullopt;
  // m = p / 10^d exactly (up to 9 decimals).
  int d = 0;
  double scale = 1;
  while (d <= 9 && std::abs(m * scale - std::round(m * scale)) > 1e-9 * std::max(1.0, m * scale)) {
    ++d;
    scale *= 10;
  }
  if (d > 9) return std::nullopt;
  if ((*hi - *lo) / m > kMaxEnumeratedMultiples) return std::nullopt;
  const int64_t p = std::llround(m * scale);
  const int64_t first = static_cast<int64_t>(std::ceil(*lo / m)) - 1;
  const int64_t last = static_cast<int64_t>(std::floor(*hi / m)) + 1;
  if (p <= 0 || last - first > kMaxEnumeratedMultiples + 2) return std::nullopt;
  int64_t pow10 = 1;
  for (int i = 0; i < d; ++i) pow10 *= 10;
  std::vector<Sequence> alts;
  for (int64_t i = first; i <= last; ++i) {
    const int64_t scaled = i * p;  // the value times 10^d
    const int64_t whole = std::abs(scaled) / pow10, frac = std::abs(scaled) % pow10;
    if (integer && frac != 0) continue;
    std::string text = (scaled < 0 ? "-" : "") + std::to_string(whole);
    if (frac != 0) {
      std::string f = fmt::format("{:0{}}", frac, d);
      while (!f.empty() && f.back() == '0') f.pop_back();
      text += "." + f;
    }
    // Kept only when the value also passes the bounds and multipleOf in double arithmetic,
    // as validators compute them, so no validator can disagree.
    const double x = std::stod(text);
    const double q = x / m;
    if ((lo_ex ? x <= *lo : x < *lo) || (hi_ex ? x >= *hi : x > *hi) || q != std::round(q)) continue;
    alts.push_back(lit(text));
  }
  return rule("multiples", std::move(alts));
}

Element SchemaCompiler::integer_multiple_of(int k, bool negative, bool zero) {
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
  if (zero) b_.add_alt(digits, lit("0"));
  if (!negative) return rule("multiple_of", {{GrammarBuilder::call(digits)}});
  return rule("multiple_of", {{b_.optional(lit("-"), "sign"), GrammarBuilder::call(digits)}});
}

}  // namespace deepinfer::structured::detail
