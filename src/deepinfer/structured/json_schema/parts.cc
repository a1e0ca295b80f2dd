// Integer range lowering, string formats and key exclusion (see parts.h).
#include "deepinfer/structured/json_schema/parts.h"

#include <functional>
#include <map>
#include <memory>

#include "deepinfer/structured/automata/char_class.h"

namespace deepinfer::structured {
namespace {

ByteSet digit_set(char lo, char hi) {
  ByteSet s;
  s.set_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return s;
}

// Same-length decimal strings a..z (digit-wise), appended to `alts` as sequences.
void same_length(GrammarBuilder& b, const std::string& a, const std::string& z, Sequence prefix,
                 std::vector<Sequence>& alts) {
  if (a.empty()) {
    alts.push_back(std::move(prefix));
    return;
  }
  if (a.size() == 1) {
    prefix.push_back(b.bytes(digit_set(a[0], z[0])));
    alts.push_back(std::move(prefix));
    return;
  }
  // Full blocks: [a0-z0][0-9]{n-1} when the tails span every value.
  if (a.find_first_not_of('0', 1) == std::string::npos && z.find_first_not_of('9', 1) == std::string::npos) {
    prefix.push_back(b.bytes(digit_set(a[0], z[0])));
    for (size_t i = 1; i < a.size(); ++i) prefix.push_back(b.bytes(digit_set('0', '9')));
    alts.push_back(std::move(prefix));
    return;
  }
  if (a[0] == z[0]) {
    prefix.push_back(b.byte(static_cast<uint8_t>(a[0])));
    same_length(b, a.substr(1), z.substr(1), std::move(prefix), alts);
    return;
  }
  std::string nines(a.size() - 1, '9'), zeros(a.size() - 1, '0');
  Sequence p1 = prefix;
  p1.push_back(b.byte(static_cast<uint8_t>(a[0])));
  same_length(b, a.substr(1), nines, std::move(p1), alts);
  if (z[0] - a[0] >= 2) {
    Sequence mid = prefix;
    mid.push_back(b.bytes(digit_set(a[0] + 1, z[0] - 1)));
    for (size_t i = 1; i < a.size(); ++i) mid.push_back(b.bytes(digit_set('0', '9')));
    alts.push_back(std::move(mid));
  }
  Sequence p3 = prefix;
  p3.push_back(b.byte(static_cast<uint8_t>(z[0])));
  same_length(b, zeros, z.substr(1), std::move(p3), alts);
}

// Non-negative integers in [lo, hi] (hi < 0 = unbounded) as alternatives.
void uint_range(GrammarBuilder& b, int64_t lo, int64_t hi, std::vector<Sequence>& alts) {
  if (hi >= 0 && hi < lo) return;
  std::string slo = std::to_string(lo);
  size_t max_len = hi < 0 ? 19 : std::to_string(hi).size();
  for (size_t len = slo.size(); len <= max_len; ++len) {
    std::string a = len == slo.size() ? slo : "1" + std::string(len - 1, '0');
    if (len == 1 && lo == 0) a = "0";
    std::string z(len, '9');
    if (hi >= 0 && len == max_len) z = std::to_string(hi);
    same_length(b, a, z, {}, alts);
  }
  if (hi < 0) {  // 20+ digits
    Sequence s{b.bytes(digit_set('1', '9'))};
    s.push_back(b.repeat({b.bytes(digit_set('0', '9'))}, 19, -1, "digits"));
    alts.push_back(std::move(s));
  }
}

Element signed_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Sequence> alts;
  if (!hi || *hi >= 0) uint_range(b, lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1, alts);
  if (!lo || *lo < 0) {
    // -x for x in [max(1, -hi), -lo]
    std::vector<Sequence> neg;
    int64_t nlo = hi ? std::max<int64_t>(1, -*hi) : 1;
    uint_range(b, nlo, lo ? -*lo : -1, neg);
    if (!neg.empty()) {
      Element r = GrammarBuilder::call(b.rule_with_alts("neg_int", std::move(neg)));
      alts.push_back({b.byte('-'), r});
    }
  }
  return GrammarBuilder::call(b.rule_with_alts("int_range", std::move(alts)));
}

Element digits_plus(GrammarBuilder& b) { return b.plus({b.bytes(digit_set('0', '9'))}, "digits"); }

}  // namespace

Element integer_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  return signed_range(b, lo, hi);
}

Element number_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi,
                     bool lo_exclusive, bool hi_exclusive, int max_fraction_digits) {
  std::vector<Sequence> alts;
  // Integer values, optionally written with a zero fraction (1.0); exclusive ends drop out.
  std::optional<int64_t> ilo = lo, ihi = hi;
  if (ilo && lo_exclusive) *ilo += 1;
  if (ihi && hi_exclusive) *ihi -= 1;
  if (!ilo || !ihi || *ilo <= *ihi) {
    Element zeros = max_fraction_digits < 0 ? b.plus({b.byte('0')}, "zeros")
                                            : b.repeat({b.byte('0')}, 1, max_fraction_digits, "zeros");
    Element zero_frac = b.optional({b.byte('.'), zeros}, "zero_frac");
    alts.push_back({signed_range(b, ilo, ihi), zero_frac});
  }
  if (max_fraction_digits == 0) return GrammarBuilder::call(b.rule_with_alts("num_range", std::move(alts)));
  // A non-zero fraction keeps the value strictly inside (ip, ip+1), so these alternatives
  // hold for inclusive and exclusive bounds alike.
  Element frac;
  if (max_fraction_digits < 0) {
    frac = GrammarBuilder::call(b.rule_with_alts(
        "nz_frac", {{b.star({b.byte('0')}, "zeros"), b.bytes(digit_set('1', '9')),
                     b.star({b.bytes(digit_set('0', '9'))}, "digits")}}));
  } else {
    // nz(k): at most k digits, not all zero: [1-9] [0-9]{0,k-1} | 0 nz(k-1).
    uint32_t prev = 0;
    for (int k = 1; k <= max_fraction_digits; ++k) {
      std::vector<Sequence> a = {{b.bytes(digit_set('1', '9')), b.repeat({b.bytes(digit_set('0', '9'))}, 0, k - 1, "digits")}};
      if (k > 1) a.push_back({b.byte('0'), GrammarBuilder::call(prev)});
      prev = b.rule_with_alts("nz_frac", std::move(a));
    }
    frac = GrammarBuilder::call(prev);
  }
  // ip.f in (ip, ip+1): needs ip >= lo and ip + 1 <= hi.
  {
    std::vector<Sequence> ips;
    int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
    if (!hi || *hi - 1 >= a) uint_range(b, a, hi ? *hi - 1 : -1, ips);
    if (!ips.empty())
      alts.push_back({GrammarBuilder::call(b.rule_with_alts("ip", std::move(ips))), b.byte('.'), frac});
  }
  // -ip.f in (-(ip+1), -ip): needs ip >= -hi and ip + 1 <= -lo.
  if (!lo || *lo <= -1) {
    std::vector<Sequence> ips;
    int64_t a = hi ? std::max<int64_t>(-*hi, 0) : 0;
    int64_t z = lo ? -*lo - 1 : -1;
    if (z < 0 ? !lo : z >= a) uint_range(b, a, z, ips);
    if (!ips.empty())
      alts.push_back({b.byte('-'), GrammarBuilder::call(b.rule_with_alts("ip", std::move(ips))),
                      b.byte('.'), frac});
  }
  return GrammarBuilder::call(b.rule_with_alts("num_range", std::move(alts)));
}

Element any_integer(GrammarBuilder& b) { return signed_range(b, std::nullopt, std::nullopt); }

Element any_number(GrammarBuilder& b) {
  Element frac = b.optional({b.byte('.'), digits_plus(b)}, "frac");
  ByteSet e, sign;
  e.set('e');
  e.set('E');
  sign.set('+');
  sign.set('-');
  Element exp = b.optional({b.bytes(e), b.optional({b.bytes(sign)}, "sign"), digits_plus(b)}, "exp");
  return GrammarBuilder::call(b.rule_with_alts("number", {{any_integer(b), frac, exp}}));
}

// Format `regex`: a subset of ECMAScript pattern syntax, valid with and without the `u`
// flag, so every string it matches is a valid regex. Literals are any character but the
// syntax characters; escapes are \d \w \s (and negations), \n \r \t \f \v and the
// syntax characters and '/'; classes hold such characters, escapes (plus \-) and the ranges
// a-z, A-Z, 0-9 (so no range is out of order); quantifiers are * + ? {n} {n,} and {n,m} with
// n <= m decided by digit counts (lazy forms too); ^ and $ are not quantified; groups
// ( ) and (?: ) nest two deep.
namespace {
std::string regex_syntax_subset() {
  const std::string lit = R"([^\\^$.|?*+()\[\]{}])";
  const std::string esc = R"(\\[dDwWsSnrtfv\\^$.|?*+()\[\]{}/])";
  const std::string class_item =
      std::string("(") + R"([^\\\]\[\-])" + "|" + R"(\\[dDwWsSnrtfv\\^$.|?*+()\[\]{}/\-])" +
      "|a-z|A-Z|0-9)";
  const std::string cls = R"(\[\^?)" + class_item + "*" + R"(\])";
  std::string range = "[0-9],[1-9][0-9]+|[1-9][0-9],[1-9][0-9][0-9]+";
  for (int d = 0; d <= 9; ++d) range += fmt::format("|{},[{}-9]", d, d);
  const std::string quant = R"((([*+?]|\{[0-9]+,?\}|\{()" + range + R"()\})\??))";
  const std::string atom = "(" + lit + "|" + esc + "|\\.|" + cls + ")";
  auto alternation = [](const std::string& term) { return term + "*(\\|" + term + "*)*"; };
  auto group = [&](const std::string& body) { return R"(\((\?:)?)" + body + R"(\))"; };
  std::string term = "(" + atom + quant + "?|\\^|\\$)";
  for (int depth = 0; depth < 2; ++depth)
    term = "(" + atom + quant + "?|" + group(alternation(term)) + quant + "?|\\^|\\$)";
  return alternation(term);
}

// RFC 3986 URI-reference, a subset: no userinfo, no IP literals, no network-path relative
// references; every string it matches is a valid URI-reference. With `ucs` (RFC 3987's
// ucschar) added wherever unreserved characters may stand, every match is a valid
// IRI-reference (iprivate, allowed only in queries, is left out).
constexpr const char* kUcsChar =
    "\\u{A0}-\\u{D7FF}\\u{F900}-\\u{FDCF}\\u{FDF0}-\\u{FFEF}\\u{10000}-\\u{1FFFD}\\u{20000}-"
    "\\u{2FFFD}\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}"
    "\\u{70000}-\\u{7FFFD}\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}"
    "\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}\\u{E1000}-\\u{EFFFD}";
struct UriParts {
  std::string uri, rel;
};
UriParts uri_parts(const std::string& ucs) {
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string pchar = "([A-Za-z0-9._~!$&'()*+,;=:@" + ucs + "-]|" + pct + ")";
  const std::string pchar_nc = "([A-Za-z0-9._~!$&'()*+,;=@" + ucs + "-]|" + pct + ")";
  const std::string qf = "([A-Za-z0-9._~!$&'()*+,;=:@/?" + ucs + "-]|" + pct + ")*";
  const std::string tail = "(\\?" + qf + ")?(#" + qf + ")?";
  const std::string abs_path = "/(" + pchar + "+(/" + pchar + "*)*)?";
  const std::string authority =
      "//([A-Za-z0-9._~!$&'()*+,;=" + ucs + "-]|" + pct + ")*(:[0-9]*)?(/" + pchar + "*)*";
  UriParts out;
  out.uri = "[A-Za-z][A-Za-z0-9+.-]*:(" + authority + "|" + abs_path + "|" + pchar + "+(/" +
            pchar + "*)*)?" + tail;
  out.rel = "(" + abs_path + "|" + pchar_nc + "+(/" + pchar + "*)*)?" + tail;
  return out;
}
std::string uri_reference_subset(const std::string& ucs) {
  UriParts p = uri_parts(ucs);
  return "(" + p.uri + ")|(" + p.rel + ")";
}
std::string absolute_uri_subset(const std::string& ucs) { return uri_parts(ucs).uri; }
}  // namespace

std::optional<std::string> format_regex(std::string_view f) {
  const std::string d2 = "[0-9]{2}";
  const std::string date =
      "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
      "02-(0[1-9]|1[0-9]|2[0-8]))";
  const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  const std::string h = "[0-9a-fA-F]{1,4}";
  if (f == "date") return date;
  if (f == "time") return time;
  if (f == "date-time") return date + "[Tt]" + time;
  if (f == "uuid")
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  if (f == "email")
    return "[A-Za-z0-9_+-]+(\\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
           "(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?){1,3}";
  if (f == "hostname")
    return "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?){0,2}";
  if (f == "ipv4") {
    std::string oct = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    return oct + "\\." + oct + "\\." + oct + "\\." + oct;
  }
  if (f == "ipv6") {
    std::string re = "(" + h + ":){7}" + h + "|::|(" + h + ":){1,7}:|:(:" + h + "){1,7}";
    for (int k = 1; k <= 6; ++k)
      re += "|(" + h + ":){" + std::to_string(k) + "}(:" + h + "){1," + std::to_string(7 - k) + "}";
    return re;
  }
  if (f == "uri-reference") return uri_reference_subset("");
  if (f == "iri-reference") return uri_reference_subset(kUcsChar);
  // The absolute forms, as the uri-reference subset's first alternative.
  if (f == "iri") return absolute_uri_subset(kUcsChar);
  if (f == "uri")
    return "[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~:/?#@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*";
  if (f == "regex") return regex_syntax_subset();
  if (f == "duration") {
    // RFC 3339 appendix A, exactly: P then a date part (D, M[D], Y[M[D]]) with an optional
    // time part, or a time part alone (H[M[S]], M[S], S), or weeks.
    const std::string n = "[0-9]+";
    const std::string t = "T(" + n + "H(" + n + "M(" + n + "S)?)?|" + n + "M(" + n + "S)?|" + n + "S)";
    const std::string date = "(" + n + "D|" + n + "M(" + n + "D)?|" + n + "Y(" + n + "M(" + n + "D)?)?)";
    return "P(" + date + "(" + t + ")?|" + t + "|" + n + "W)";
  }
  // RFC 6901: reference tokens with '~' only as ~0 or ~1.
  const std::string pointer = "(/([^/~]|~[01])*)*";
  if (f == "json-pointer") return pointer;
  // draft-handrews-relative-json-pointer-01: a non-negative integer, then '#' or a JSON
  // pointer (the later index-adjustment form, "1+2/x", is left out: a sound subset).
  if (f == "relative-json-pointer") return "(0|[1-9][0-9]*)(#|" + pointer + ")";
  if (f == "uri-template") {
    // RFC 6570 level 4: ASCII literals and %-escapes (literal non-ASCII characters are left
    // out: a sound subset) and expressions {op? varspec(,varspec)*} (the operators RFC 6570
    // reserves for later, = , ! @ |, are left out).
    const std::string pct = "%[0-9A-Fa-f]{2}";
    const std::string literal = "[!#$&()*+,\\-./0-9:;=?@A-Z\\[\\]_a-z~]|" + pct;
    const std::string varchar = "([A-Za-z0-9_]|" + pct + ")";
    const std::string varspec = varchar + "(\\.?" + varchar + ")*(:[1-9][0-9]{0,3}|\\*)?";
    const std::string expr = "\\{[+#./;?&]?" + varspec + "(," + varspec + ")*\\}";
    return "(" + literal + "|" + expr + ")*";
  }
  return std::nullopt;
}

namespace {

// The code points of a UTF-8 name; nullopt when it is not well-formed UTF-8.
std::optional<std::vector<uint32_t>> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const int n = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return std::nullopt;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<uint8_t>(s[i + k]);
      if ((d & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : n == 4 ? 0x10000 : 0;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return out;
}

// A trie of the excluded names, one edge per character, flat (a name may be very long).
struct KeyTrieNode {
  bool terminal = false;
  std::map<uint32_t, uint32_t> kids;  // character -> node index
};

bool plain_ascii(uint32_t cp) { return cp >= 0x20 && cp < 0x80 && cp != '"' && cp != '\\'; }

}  // namespace

Result<Element> key_excluding(GrammarBuilder& b, const std::vector<std::string>& excluded) {
  // Characters are written as in any JSON string (char_class), so a key is well-formed UTF-8
  // exactly as a string value is, and each character has one spelling: a declared name cannot
  // come back as an extra member spelled differently.
  std::vector<KeyTrieNode> trie(1);
  for (const auto& w : excluded) {
    auto cps = code_points(w);
    if (!cps) return invalid_argument("json schema: property name '{}' is not well-formed UTF-8", w);
    uint32_t n = 0;
    for (uint32_t cp : *cps) {
      auto [it, fresh] = trie[n].kids.try_emplace(cp, static_cast<uint32_t>(trie.size()));
      if (fresh) trie.emplace_back();
      n = it->second;
    }
    trie[n].terminal = true;
  }
  // rest ::= char rest | '"'
  const uint32_t rest = b.new_rule("key_rest");
  b.add_alt(rest, {json_string_char(b), GrammarBuilder::call(rest)});
  b.add_alt(rest, {b.byte('"')});
  CodePointSet multi_byte, escaped;
  multi_byte.add(0x80, 0x10FFFF);
  escaped.add(0, 0x1F);
  escaped.add('"');
  escaped.add('\\');
  const Element multi = char_class(b, multi_byte, true);
  const Element escapes = char_class(b, escaped, true);
  std::vector<uint32_t> rule(trie.size());
  for (auto& r : rule) r = b.new_rule("key_ex");
  for (size_t n = 0; n < trie.size(); ++n) {
    const KeyTrieNode& node = trie[n];
    ByteSet plain;
    for (uint32_t c = 0x20; c < 0x80; ++c)
      if (plain_ascii(c)) plain.set(static_cast<uint8_t>(c));
    CodePointSet taken;
    bool all_plain = true;
    for (const auto& [cp, kid] : node.kids) {
      taken.add(cp);
      if (plain_ascii(cp)) {
        plain.bits[cp >> 6] &= ~(uint64_t{1} << (cp & 63));
        b.add_alt(rule[n], {b.byte(static_cast<uint8_t>(cp)), GrammarBuilder::call(rule[kid])});
      } else {
        all_plain = false;
        CodePointSet one;
        one.add(cp);
        b.add_alt(rule[n], {char_class(b, one, true), GrammarBuilder::call(rule[kid])});
      }
    }
    if (!node.terminal) b.add_alt(rule[n], {b.byte('"')});
    if (all_plain) {
      // The common case: the other characters as one byte class and two shared rules.
      if (!plain.empty()) b.add_alt(rule[n], {b.bytes(plain), GrammarBuilder::call(rest)});
      b.add_alt(rule[n], {multi, GrammarBuilder::call(rest)});
      b.add_alt(rule[n], {escapes, GrammarBuilder::call(rest)});
    } else {
      CodePointSet others = taken.complement();
      if (!others.empty()) b.add_alt(rule[n], {char_class(b, others, true), GrammarBuilder::call(rest)});
    }
    DI_RETURN_IF_ERROR(b.check_budget());
  }
  return GrammarBuilder::call(b.rule_with_alts("key", {{b.byte('"'), GrammarBuilder::call(rule[0])}}));
}

}  // namespace deepinfer::structured
