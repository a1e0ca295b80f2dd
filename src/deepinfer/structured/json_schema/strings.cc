// String lowering for the JSON Schema compiler: pattern, format and length bounds, one-class
// patterns as counted runs, any other combination as one code-point automaton.
#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/json_schema/schema_compiler.h"

namespace deepinfer::structured::detail {
namespace {

// An anchored pattern that is one character class repeated: `^[a-z_]+$`, `^(\\d{3,5})$`, ...
struct ClassRun {
  std::string atom;
  int64_t lo = 1, hi = 1;  // hi < 0: unbounded
};
std::optional<ClassRun> single_class_run(std::string p) {
  if (p.size() < 3 || p.front() != '^' || p.back() != '$' || p[p.size() - 2] == '\\')
    return std::nullopt;
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
      if (p[i] == '\\')
        ++i;
      else if (p[i] == '[')
        return std::nullopt;  // nested or POSIX-style classes
    }
    if (i >= p.size()) return std::nullopt;
    ++i;
  } else if (p[0] == '\\' && p.size() >= 2 &&
             std::string("dDwWsS").find(p[1]) != std::string::npos) {
    i = 2;
  } else if (p[0] == '.') {
    i = 1;
  } else {
    return std::nullopt;
  }
  ClassRun run;
  run.atom = p.substr(0, i);
  std::string q = p.substr(i);
  if (q == "+") {
    run.lo = 1;
    run.hi = -1;
  } else if (q == "*") {
    run.lo = 0;
    run.hi = -1;
  } else if (q == "?") {
    run.lo = 0;
    run.hi = 1;
  } else if (q.empty()) {
    run.lo = run.hi = 1;
  } else if (q.size() >= 3 && q.front() == '{' && q.back() == '}') {
    std::string body = q.substr(1, q.size() - 2);
    size_t comma = body.find(',');
    auto num = [](const std::string& t) -> std::optional<int64_t> {
      if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      return std::stoll(t);
    };
    auto a = num(body.substr(0, comma));
    if (!a) return std::nullopt;
    run.lo = *a;
    if (comma == std::string::npos)
      run.hi = *a;
    else if (comma + 1 == body.size())
      run.hi = -1;
    else if (auto z = num(body.substr(comma + 1)))
      run.hi = *z;
    else
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  return run;
}
}  // namespace

bool spec_defined_format(const std::string& f) {
  static const std::set<std::string> kSpec = {
      "date-time", "date",          "time", "duration",     "email",        "idn-email",
      "hostname",  "idn-hostname",  "ipv4", "ipv6",         "uri",          "uri-reference",
      "iri",       "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer",
      "regex"};
  return kSpec.count(f) > 0;
}

// The strings matching the pattern (search semantics) and the format (whole string) with
// between lo and hi code points (hi < 0: unbounded), as one automaton.
Result<CodePointDfa> string_automaton(const std::optional<std::string>& pattern,
                                      const std::optional<std::string>& format, int64_t lo,
                                      int64_t hi, PatternDfaMemo* patterns) {
  std::vector<CodePointDfa> parts;
  if (pattern) {
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(*pattern, /*search=*/true, patterns));
    parts.push_back(std::move(d));
  }
  if (format) {
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_pattern(*format, /*search=*/false, patterns));
    parts.push_back(std::move(d));
  }
  CodePointDfa lang = parts[0];
  if (parts.size() == 2) {
    DI_ASSIGN_OR_RETURN(lang, dfa_product({&parts[0], &parts[1]},
                                          [](const std::vector<bool>& a) { return a[0] && a[1]; }));
  }
  // Bounds the language already meets are dropped (`^[0-9]{5}$` with maxLength 5).
  auto [shortest, longest] = dfa_length_range(lang);
  if (shortest >= lo) lo = 0;
  if (hi >= 0 && longest >= 0 && longest <= hi) hi = -1;
  if (lo > 0 || hi >= 0) {
    if (lo > kMaxLengthExpand) return unsupported("minLength {} is above {}", lo, kMaxLengthExpand);
    if (hi > lo) {
      // Past the state cap, maxLength is tightened to the largest bound that fits: fewer
      // strings, all still valid (as maxLength above 5000 is capped elsewhere).
      int64_t fit = dfa_length_fit(lang, hi);
      if (fit < hi) hi = std::max(fit, lo);
    }
    auto bounded = dfa_with_length(lang, lo, hi);
    if (!bounded.is_ok()) return bounded.status();
    lang = std::move(*bounded);
  }
  return lang;
}

Result<Element> SchemaCompiler::gen_string(const Json& s, const std::string& ptr) {
  auto min = get_count(s, "minLength");
  auto max = get_count(s, "maxLength");
  std::optional<std::string> pattern, format;
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string())
      return invalid_argument("json schema: pattern at '{}' is not a string", ptr);
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
      int64_t hi =
          run->hi < 0 ? max.value_or(-1) : (max ? std::min<int64_t>(run->hi, *max) : run->hi);
      if (hi >= 0 && hi < lo) return never();
      if (lo > kMaxLengthExpand)
        return unsupported("json schema: minLength {} at '{}' is above {}", lo, ptr,
                           kMaxLengthExpand);
      if (hi > kMaxLengthExpand) hi = std::max(lo, kMaxLengthExpand);  // sound: fewer strings
      pattern =
          fmt::format("^{}{{{},{}}}$", run->atom, lo, hi < 0 ? std::string() : std::to_string(hi));
      min.reset();
      max.reset();
    }
  }
  if ((pattern || format) && (min || max)) {
    // A pattern every string matches (`.*`, `(x+)?` unanchored) adds nothing: the length
    // bounds alone keep the cheap counted run.
    auto base = string_automaton(pattern, format, 0, -1, &patterns_);
    if (base.is_ok() && dfa_is_universal(*base)) {
      pattern.reset();
      format.reset();
    }
  }
  if ((pattern || format) && (min || max || (pattern && format))) {
    // Several constraints on one string: intersect their automata (exact), then lower.
    auto lang = string_automaton(pattern, format, min.value_or(0), max.value_or(-1), &patterns_);
    if (!lang.is_ok())
      return Status(lang.status().code(), fmt::format("json schema: string constraints at '{}' "
                                                      "(pattern/format/length): {}",
                                                      ptr, lang.status().message()));
    return rule("pattern_string",
                {cat({lit("\""), {dfa_to_rule(b_, *lang, true, "str_dfa")}, lit("\"")})});
  }
  if (pattern || format) {
    std::string where = ptr + (pattern ? "/pattern" : "/format");
    auto e = compile_regex(b_, pattern ? *pattern : *format,
                           RegexOptions{.json_string = true, .search = pattern.has_value()});
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

}  // namespace deepinfer::structured::detail
