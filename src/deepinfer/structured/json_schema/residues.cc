// Numbers constrained only by integer multipleOf under not/allOf/anyOf/oneOf/$ref: whether an
// integer is valid then depends only on its remainder modulo the lcm L of the divisors (and
// not on its sign), so each remainder is decided once and the digits run a remainder-mod-L
// automaton, minimized (dfa_partition.h). Non-integer numbers are left out (a sound subset, as
// for plain multipleOf k). Values are decided by arithmetic (numeric.h) when the
// schema is purely numeric, else by the InstanceValidator.
#include <numeric>

#include "deepinfer/structured/automata/dfa_partition.h"
#include "deepinfer/structured/json_schema/schema_compiler.h"
#include "deepinfer/structured/json_schema/numeric.h"
#include "deepinfer/structured/json_schema/validate.h"

namespace deepinfer::structured::detail {
namespace {

constexpr int64_t kMaxResidueModulus = 100'000;

// Past this bound on |threshold| the values below it are not spelled out one state each.
constexpr int64_t kMaxExactMagnitude = 10'000;
constexpr int64_t kMaxRawStatesPerSign = 50'000;  // before minimization

// Collects the divisors and the bounds' values; false when some keyword could make validity
// depend on more than the remainder and the place among the bounds (enum, ...) or a $ref does
// not resolve locally.
bool residue_only(const Json& root, const Json& s, std::set<int64_t>& divisors,
                  std::vector<double>& thresholds, int depth) {
  static const std::set<std::string> kNote = {
      "title",    "description", "$comment", "comment", "examples", "default",    "deprecated",
      "readOnly", "writeOnly",   "$schema",  "$id",     "$defs",    "definitions"};
  if (depth > 32) return false;
  if (s.is_boolean()) return true;
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (kNote.count(k) || k.rfind("comment", 0) == 0) continue;
    if (k == "type") continue;  // decided per value by the validator
    if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (v.is_boolean()) continue;  // draft 4: read by the validator with its bound
      if (!v.is_number() || !std::isfinite(v.get<double>())) return false;
      thresholds.push_back(v.get<double>());
      continue;
    }
    if (k == "multipleOf") {
      if (!v.is_number() || v.get<double>() < 1 || v.get<double>() != std::floor(v.get<double>()) ||
          v.get<double>() > kMaxResidueModulus)
        return false;
      divisors.insert(v.get<int64_t>());
    } else if (k == "not") {
      if (!residue_only(root, v, divisors, thresholds, depth + 1)) return false;
    } else if (k == "allOf" || k == "anyOf" || k == "oneOf") {
      if (!v.is_array()) return false;
      for (const auto& b : v)
        if (!residue_only(root, b, divisors, thresholds, depth + 1)) return false;
    } else if (k == "$ref") {
      if (!v.is_string() || v.get<std::string>().rfind("#/", 0) != 0) return false;
      try {
        const Json& t = root.at(Json::json_pointer(v.get<std::string>().substr(1)));
        if (!residue_only(root, t, divisors, thresholds, depth + 1)) return false;
      } catch (const std::exception&) {
        return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

// Whether the integer v is valid against s: NumericPredicate when s is purely numeric (the
// common case, thousands of values), else the validator (kUnknown possible).
class IntegerVerdicts {
 public:
  IntegerVerdicts(const Json& root, const Json& s, bool enforce_formats, PatternDfaMemo* patterns)
      : s_(s),
        predicate_(NumericPredicate::compile(root, s)),
        validator_(root, enforce_formats, patterns) {}
  Verdict operator()(int64_t v) {
    if (predicate_) return predicate_->accepts(v) ? Verdict::kValid : Verdict::kInvalid;
    return validator_.validate(s_, Json(v));
  }
  // Validity of every remainder 0..modulus-1 (1 valid, 0 invalid); nullopt when some verdict
  // is unknown. Periodic numeric schemas are decided as bit vectors, node by node.
  std::optional<std::vector<int32_t>> residues(int64_t modulus) {
    std::vector<int32_t> out(static_cast<size_t>(modulus));
    if (predicate_)
      if (auto bits = predicate_->residue_bits(modulus)) {
        for (int64_t r = 0; r < modulus; ++r) out[r] = ((*bits)[r / 64] >> (r % 64)) & 1;
        return out;
      }
    for (int64_t r = 0; r < modulus; ++r) {
      Verdict v = (*this)(r);
      if (v == Verdict::kUnknown) return std::nullopt;
      out[r] = v == Verdict::kValid;
    }
    return out;
  }

 private:
  const Json& s_;
  std::optional<NumericPredicate> predicate_;
  InstanceValidator validator_;
};

}  // namespace

Result<std::optional<Element>> SchemaCompiler::residue_number(const Json& s, const std::string& ptr,
                                                              bool plain) {
  using Out = std::optional<Element>;
  if (!s.is_object() || !s.contains("type")) return Out();
  std::vector<std::string> types = declared_types(s);
  for (const auto& t : types)
    if (t != "number" && t != "integer") return Out();
  bool combined = s.contains("not") || s.contains("allOf") || s.contains("anyOf") ||
                  s.contains("oneOf") || s.contains("$ref");
  std::set<int64_t> divisors;
  std::vector<double> thresholds;
  if ((!combined && !plain) || !residue_only(root_, s, divisors, thresholds, 0) || divisors.empty())
    return Out();
  int64_t modulus = 1;
  for (int64_t k : divisors) {
    modulus = std::lcm(modulus, k);
    if (modulus > kMaxResidueModulus) return Out();
  }
  if (!thresholds.empty()) return bounded_residues(s, thresholds, modulus, ptr);
  IntegerVerdicts verdict(root_, s, o_.enforce_formats, &patterns_);
  std::optional<std::vector<int32_t>> valid = verdict.residues(modulus);
  if (!valid) return Out();
  const std::vector<int32_t> is_valid = *valid;  // [modulus]
  // Minimization of r -> (10 r + d) mod L; two remainders are equivalent when every digit
  // suffix leads both to valid remainders or both to invalid ones. Remainders with equal
  // validity and equal 10 r mod L have the very same successors, so the partition starts from
  // one state per such pair (L = 24,024 = 8 * 3,003: about half the remainders).
  const auto L = static_cast<size_t>(modulus);
  std::vector<int32_t> pair_id(2 * L, -1), of(L), rep;  // of: [L] remainder -> pair state
  for (size_t r = 0, y = 0; r < L; ++r) {               // y = 10 r mod L, without divisions
    int32_t& id = pair_id[is_valid[r] * L + y];
    if (id < 0) {
      id = static_cast<int32_t>(rep.size());
      rep.push_back(static_cast<int32_t>(r));
    }
    of[r] = id;
    y += 10;
    y = y < L ? y : y % L;
  }
  const size_t m = rep.size();
  std::vector<int32_t> table(m * 10), labels(m);  // [m * 10], [m]
  for (size_t q = 0; q < m; ++q) {
    labels[q] = is_valid[rep[q]];
    const size_t y = (10 * static_cast<size_t>(rep[q])) % L;
    for (size_t d = 0; d < 10; ++d) table[q * 10 + d] = of[y + d < L ? y + d : (y + d) % L];
  }
  std::vector<int32_t> pair_class = coarsest_stable_partition(m, 10, table, labels);
  std::vector<int32_t> cls(L);  // [L] class of each remainder
  for (size_t r = 0; r < L; ++r) cls[r] = pair_class[of[r]];
  const size_t num_classes = static_cast<size_t>(*std::max_element(cls.begin(), cls.end())) + 1;
  if (num_classes > kMaxDfaStates)
    return unsupported(
        "json schema: numbers at '{}': the remainder automaton mod {} has more than {} states", ptr,
        modulus, kMaxDfaStates);
  // One rule per class: a digit moves to the class of the new remainder; the end is allowed
  // in classes of valid remainders (validity is a class invariant).
  std::vector<uint32_t> rules(num_classes);
  std::vector<int64_t> repr(num_classes, -1);
  for (int64_t r = 0; r < modulus; ++r)
    if (repr[cls[r]] < 0) repr[cls[r]] = r;
  for (size_t c = 0; c < num_classes; ++c) rules[c] = b_.new_rule("residue");
  // The digits leading to one class, as a 10-bit mask; one byte class per mask (thousands of
  // rules share a few dozen of them).
  std::vector<std::optional<Element>> digit_class(1 << 10);
  for (size_t c = 0; c < num_classes; ++c) {
    std::array<int32_t, 10> target;
    std::array<uint16_t, 10> mask{};  // [digit] digits with the same target as it, at its first
    const int64_t y = (10 * repr[c]) % modulus;
    for (int d = 0; d < 10; ++d) {
      target[d] = cls[y + d < modulus ? y + d : (y + d) % modulus];
      int first = 0;
      while (target[first] != target[d]) ++first;
      mask[first] |= static_cast<uint16_t>(1u << d);
    }
    for (int d = 0; d < 10; ++d) {
      if (!mask[d]) continue;
      std::optional<Element>& e = digit_class[mask[d]];
      if (!e) {
        ByteSet set;
        for (int x = 0; x < 10; ++x)
          if (mask[d] >> x & 1) set.set(static_cast<uint8_t>('0' + x));
        e = b_.bytes(set);
      }
      b_.add_alt(rules[c], {*e, GrammarBuilder::call(rules[target[d]])});
    }
    if (is_valid[repr[c]]) b_.add_alt(rules[c], {});
  }
  std::vector<Sequence> first;
  if (is_valid[0]) first.push_back(lit("0"));
  for (int d = 1; d <= 9; ++d)
    first.push_back(
        {b_.byte(static_cast<uint8_t>('0' + d)), GrammarBuilder::call(rules[cls[d % modulus]])});
  Element digits = rule("residue_digits", std::move(first));
  return Out(rule("residue_number", {{b_.optional(lit("-"), "sign"), digits}}));
}

// With bounds, validity depends on the remainder mod L and on where the integer lies among
// the bounds. Below B (a power of ten above every |bound|) each value is its own state, told
// valid or not by IntegerVerdicts; from B on, every integer of one sign and remainder lies on
// the same side of every bound, so one representative (B L + r) decides the class. The
// automaton reads optional '-' then digits (no leading zeros) and is minimized.
Result<std::optional<Element>> SchemaCompiler::bounded_residues(const Json& s,
                                                                const std::vector<double>& bounds,
                                                                int64_t modulus,
                                                                const std::string& ptr) {
  using Out = std::optional<Element>;
  int64_t big = 1;
  for (double t : bounds)
    while (static_cast<double>(big) <= std::abs(t)) {
      big *= 10;
      if (big > kMaxExactMagnitude) return Out();
    }
  if (big - 1 + modulus > kMaxRawStatesPerSign) return Out();
  IntegerVerdicts verdict(root_, s, o_.enforce_formats, &patterns_);
  bool unknown_seen = false;
  auto valid = [&](int64_t v) {
    Verdict x = verdict(v);
    if (x == Verdict::kUnknown) unknown_seen = true;
    return x == Verdict::kValid;
  };
  // States: 0 start, 1 after '-', 2 "0", 3 "-0"; then per sign (0 +, 1 -) the exact values
  // 1..big-1 and the remainders 0..modulus-1 past big.
  const int64_t per_sign = (big - 1) + modulus;
  auto exact = [&](int sign, int64_t v) {
    return static_cast<int32_t>(4 + sign * per_sign + v - 1);
  };
  auto past = [&](int sign, int64_t r) {
    return static_cast<int32_t>(4 + sign * per_sign + (big - 1) + r);
  };
  const size_t n = static_cast<size_t>(4 + 2 * per_sign);
  // A flat table over '-' and the ten digits plus a sink (state n) for every other move,
  // partitioned directly: thousands of raw states collapse to a few dozen, so only those
  // become a CodePointDfa.
  constexpr size_t kSymbols = 11, kMinus = 0, kDigit0 = 1;
  const int32_t sink = static_cast<int32_t>(n);
  std::vector<int32_t> next((n + 1) * kSymbols, sink);  // [(n + 1) * kSymbols]
  std::vector<int32_t> accept(n + 1, 0);                // [n + 1]
  auto at = [&](int32_t q, size_t sym) -> int32_t& { return next[q * kSymbols + sym]; };
  // Where digit dig leads from the value v (< big) of a sign.
  auto step = [&](int sign, int64_t v, int dig) {
    int64_t w = 10 * v + dig;
    return w < big ? exact(sign, w) : past(sign, w % modulus);
  };
  at(0, kMinus) = 1;
  at(0, kDigit0) = 2;
  at(1, kDigit0) = 3;
  accept[2] = accept[3] = valid(0);
  for (int sign = 0; sign < 2; ++sign) {
    const int64_t mul = sign ? -1 : 1;
    for (int dig = 1; dig <= 9; ++dig) at(sign ? 1 : 0, kDigit0 + dig) = step(sign, 0, dig);
    for (int64_t v = 1; v < big; ++v) {
      accept[exact(sign, v)] = valid(mul * v);
      for (int dig = 0; dig <= 9; ++dig) at(exact(sign, v), kDigit0 + dig) = step(sign, v, dig);
    }
    for (int64_t r = 0; r < modulus; ++r) {
      accept[past(sign, r)] = valid(mul * (big * modulus + r));
      for (int dig = 0; dig <= 9; ++dig)
        at(past(sign, r), kDigit0 + dig) = past(sign, (10 * r + dig) % modulus);
    }
  }
  if (unknown_seen) return Out();
  std::vector<int32_t> block = coarsest_stable_partition(n + 1, kSymbols, next, accept);
  // The quotient, states numbered from the start's block; the sink's block (states that
  // cannot accept) is the dead state -1.
  CodePointDfa m;
  m.atoms = {{0, '-' - 1}, {'-', '-'}, {'-' + 1, '0' - 1}};
  for (uint32_t c = '0'; c <= '9'; ++c) m.atoms.push_back({c, c});
  m.atoms.push_back({'9' + 1, 0xD7FF});
  m.atoms.push_back({0xE000, 0x10FFFF});
  const size_t kAtomMinus = 1, kAtomDigit0 = 3;
  std::vector<int32_t> id(n + 1, -1), rep;  // [blocks] quotient state of each block
  auto intern = [&](int32_t q) {
    int32_t b = block[q];
    if (b == block[sink]) return -1;
    if (id[b] < 0) {
      id[b] = static_cast<int32_t>(rep.size());
      rep.push_back(q);
    }
    return id[b];
  };
  intern(0);
  for (size_t i = 0; i < rep.size(); ++i) {
    if (rep.size() > kMaxDfaStates)
      return unsupported(
          "json schema: numbers at '{}': the automaton for multipleOf with bounds has more than "
          "{} states",
          ptr, kMaxDfaStates);
    std::vector<int32_t> row(m.atoms.size(), -1);
    row[kAtomMinus] = intern(at(rep[i], kMinus));
    for (int dig = 0; dig <= 9; ++dig) row[kAtomDigit0 + dig] = intern(at(rep[i], kDigit0 + dig));
    m.next.push_back(std::move(row));
    m.accept.push_back(static_cast<uint8_t>(accept[rep[i]]));
  }
  if (rep.empty()) {  // the empty language: one dead start state
    m.next.assign(1, std::vector<int32_t>(m.atoms.size(), -1));
    m.accept.assign(1, 0);
  }
  return Out(dfa_to_rule(b_, m, false, "bounded_residues"));
}

}  // namespace deepinfer::structured::detail
