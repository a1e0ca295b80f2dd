// NumericPredicate: the schema is compiled once into a small tree of conjunctions,
// disjunctions and leaves of comparisons, divisibility and value lists (see the header).
#include "deepinfer/structured/json_schema/numeric.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>

namespace deepinfer::structured {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxNodes = 4096;  // $ref expands into copies; a cap keeps that bounded
constexpr int kMaxDecimalPlaces = 9;

// Keywords that say nothing about an instance.
bool is_note(const std::string& k) {
  static const std::set<std::string> kNote = {
      "title",    "description", "$comment", "comment", "examples", "default",    "deprecated",
      "readOnly", "writeOnly",   "$schema",  "$id",     "$defs",    "definitions"};
  return kNote.count(k) || k.rfind("comment", 0) == 0;
}

// Integers that are multiples of m: those divisible by the returned d (m = p / 10^k in lowest
// terms p' / q' makes v = n p' / q' integral exactly when p' divides v, since gcd(p', q') = 1).
// nullopt unless m > 0 has at most kMaxDecimalPlaces decimals.
std::optional<int64_t> integer_divisor(const Json& m) {
  if (m.is_number_unsigned()) {
    uint64_t u = m.get<uint64_t>();
    if (u == 0 || u >= static_cast<uint64_t>(NumericPredicate::kMaxMagnitude)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (m.is_number_integer()) {
    int64_t i = m.get<int64_t>();
    if (i <= 0 || i >= NumericPredicate::kMaxMagnitude) return std::nullopt;
    return i;
  }
  if (!m.is_number_float()) return std::nullopt;
  double x = m.get<double>();
  if (!std::isfinite(x) || x <= 0 || x >= 1e15) return std::nullopt;
  int64_t scale = 1;
  for (int k = 0; k <= kMaxDecimalPlaces; ++k, scale *= 10) {
    double scaled = x * static_cast<double>(scale);
    if (scaled >= 1e15) return std::nullopt;
    double p = std::round(scaled);
    if (p >= 1 && std::abs(scaled - p) <= 1e-13 * p) {  // only rounding error of the double
      int64_t pi = static_cast<int64_t>(p);
      return pi / std::gcd(pi, scale);
    }
  }
  return std::nullopt;
}

}  // namespace

class NumericPredicate::Builder {
 public:
  Builder(const Json& root, std::vector<Node>& nodes) : root_(root), nodes_(nodes) {}

  // The node for schema s, or -1 when s is outside the numeric set.
  int32_t add(const Json& s, int depth) {
    if (depth > kMaxDepth || nodes_.size() >= kMaxNodes) return -1;
    int32_t id = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
    if (s.is_boolean()) {
      nodes_[id].kind = s.get<bool>() ? Kind::kTrue : Kind::kFalse;
      return id;
    }
    if (!s.is_object()) return -1;
    Node leaf;
    leaf.kind = Kind::kLeaf;
    std::vector<int32_t> kids;
    auto flag = [&](const char* k) {
      return s.contains(k) && s[k].is_boolean() && s[k].get<bool>();
    };
    for (const auto& [k, v] : s.items()) {
      if (is_note(k)) continue;
      if (k == "type") {
        if (!v.is_string() && !v.is_array()) return -1;
        bool ok = false;
        for (const auto& t : v.is_array() ? v : Json::array({v}))
          ok = ok || (t.is_string() && (t == "number" || t == "integer"));
        leaf.numeric_type = ok;
      } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" ||
                 k == "exclusiveMaximum") {
        if (v.is_boolean()) continue;  // draft 4: read with its bound
        if (!v.is_number() || !std::isfinite(v.get<double>())) return -1;
        bool lower = k == "minimum" || k == "exclusiveMinimum";
        bool strict = k[0] == 'e' || flag(lower ? "exclusiveMinimum" : "exclusiveMaximum");
        leaf.bounds.emplace_back(v.get<double>(), lower ? (strict ? Cmp::kGt : Cmp::kGe)
                                                        : (strict ? Cmp::kLt : Cmp::kLe));
      } else if (k == "multipleOf") {
        std::optional<int64_t> d = integer_divisor(v);
        if (!d) return -1;
        if (*d > 1) leaf.divisors.push_back(*d);
      } else if (k == "const" || k == "enum") {
        if (k == "enum" && !v.is_array()) return -1;
        std::vector<double> values;  // other JSON types never equal a number
        for (const auto& x : k == "enum" ? v : Json::array({v}))
          if (x.is_number()) values.push_back(x.get<double>());
        leaf.value_sets.push_back(std::move(values));
      } else if (k == "not") {
        int32_t c = add(v, depth + 1);
        if (c < 0) return -1;
        int32_t n = push(Kind::kNot, {c});
        kids.push_back(n);
      } else if (k == "allOf" || k == "anyOf" || k == "oneOf") {
        if (!v.is_array()) return -1;
        std::vector<int32_t> branches;
        for (const auto& b : v) {
          int32_t c = add(b, depth + 1);
          if (c < 0) return -1;
          branches.push_back(c);
        }
        kids.push_back(push(k == "allOf"   ? Kind::kAll
                            : k == "anyOf" ? Kind::kAny
                                           : Kind::kOne,
                            std::move(branches)));
      } else if (k == "if") {
        int32_t c = add(v, depth + 1), t = -1, e = -1;
        if (c < 0) return -1;
        if (s.contains("then") && (t = add(s["then"], depth + 1)) < 0) return -1;
        if (s.contains("else") && (e = add(s["else"], depth + 1)) < 0) return -1;
        kids.push_back(push(Kind::kIf, {c, t, e}));
      } else if (k == "then" || k == "else") {
        continue;  // read with `if` (alone they have no effect)
      } else if (k == "$ref") {
        if (!v.is_string() || v.get<std::string>().rfind("#", 0) != 0) return -1;
        std::string frag = v.get<std::string>().substr(1);
        if (frag.find('%') != std::string::npos || (!frag.empty() && frag[0] != '/')) return -1;
        const Json* target = nullptr;
        try {
          target = &root_.at(Json::json_pointer(frag));
        } catch (const std::exception&) {
          return -1;
        }
        int32_t c = add(*target, depth + 1);
        if (c < 0) return -1;
        kids.push_back(c);
      } else {
        return -1;
      }
    }
    if (nodes_.size() >= kMaxNodes) return -1;
    int32_t leaf_id = static_cast<int32_t>(nodes_.size());
    nodes_.push_back(std::move(leaf));
    kids.insert(kids.begin(), leaf_id);  // the cheap checks first
    nodes_[id].kind = Kind::kAll;
    nodes_[id].kids = std::move(kids);
    return id;
  }

 private:
  int32_t push(Kind kind, std::vector<int32_t> kids) {
    Node n;
    n.kind = kind;
    n.kids = std::move(kids);
    nodes_.push_back(std::move(n));
    return static_cast<int32_t>(nodes_.size()) - 1;
  }

  const Json& root_;
  std::vector<Node>& nodes_;
};

std::optional<NumericPredicate> NumericPredicate::compile(const Json& root, const Json& schema) {
  NumericPredicate p;
  Builder b(root, p.nodes_);
  if (b.add(schema, 0) != 0 || p.nodes_.size() > kMaxNodes) return std::nullopt;
  return p;
}

bool NumericPredicate::eval(int32_t id, int64_t v) const {
  const Node& n = nodes_[id];
  switch (n.kind) {
    case Kind::kTrue:
      return true;
    case Kind::kFalse:
      return false;
    case Kind::kNot:
      return !eval(n.kids[0], v);
    case Kind::kAll:
      for (int32_t k : n.kids)
        if (!eval(k, v)) return false;
      return true;
    case Kind::kAny:
      for (int32_t k : n.kids)
        if (eval(k, v)) return true;
      return false;
    case Kind::kOne: {
      int hits = 0;
      for (int32_t k : n.kids)
        if (eval(k, v) && ++hits > 1) return false;
      return hits == 1;
    }
    case Kind::kIf:
      if (eval(n.kids[0], v)) return n.kids[1] < 0 || eval(n.kids[1], v);
      return n.kids[2] < 0 || eval(n.kids[2], v);
    case Kind::kLeaf: {
      if (!n.numeric_type) return false;
      const double x = static_cast<double>(v);  // exact below kMaxMagnitude
      for (const auto& [b, cmp] : n.bounds) {
        bool ok = cmp == Cmp::kGe   ? x >= b
                  : cmp == Cmp::kGt ? x > b
                  : cmp == Cmp::kLe ? x <= b
                                    : x < b;
        if (!ok) return false;
      }
      for (int64_t d : n.divisors)
        if (v % d != 0) return false;
      for (const auto& values : n.value_sets)
        if (std::find(values.begin(), values.end(), x) == values.end()) return false;
      return true;
    }
  }
  return false;
}

bool NumericPredicate::periodic(int32_t id, int64_t modulus) const {
  const Node& n = nodes_[id];
  if (n.kind == Kind::kLeaf) {
    if (!n.bounds.empty() || !n.value_sets.empty()) return false;
    for (int64_t d : n.divisors)
      if (modulus % d != 0) return false;
    return true;
  }
  for (int32_t k : n.kids)
    if (k >= 0 && !periodic(k, modulus)) return false;
  return true;
}

std::vector<uint64_t> NumericPredicate::bits(int32_t id, int64_t modulus) const {
  const size_t words = static_cast<size_t>(modulus + 63) / 64;
  const Node& n = nodes_[id];
  auto ones = [&] { return std::vector<uint64_t>(words, ~uint64_t{0}); };
  switch (n.kind) {
    case Kind::kTrue:
      return ones();
    case Kind::kFalse:
      return std::vector<uint64_t>(words, 0);
    case Kind::kNot: {
      std::vector<uint64_t> x = bits(n.kids[0], modulus);
      for (uint64_t& w : x) w = ~w;
      return x;
    }
    case Kind::kAll: {
      std::vector<uint64_t> x = ones();
      for (int32_t k : n.kids) {
        std::vector<uint64_t> y = bits(k, modulus);
        for (size_t i = 0; i < words; ++i) x[i] &= y[i];
      }
      return x;
    }
    case Kind::kAny: {
      std::vector<uint64_t> x(words, 0);
      for (int32_t k : n.kids) {
        std::vector<uint64_t> y = bits(k, modulus);
        for (size_t i = 0; i < words; ++i) x[i] |= y[i];
      }
      return x;
    }
    case Kind::kOne: {
      std::vector<uint64_t> once(words, 0), twice(words, 0);  // valid in >= 1, >= 2 branches
      for (int32_t k : n.kids) {
        std::vector<uint64_t> y = bits(k, modulus);
        for (size_t i = 0; i < words; ++i) {
          twice[i] |= once[i] & y[i];
          once[i] |= y[i];
        }
      }
      for (size_t i = 0; i < words; ++i) once[i] &= ~twice[i];
      return once;
    }
    case Kind::kIf: {
      std::vector<uint64_t> c = bits(n.kids[0], modulus);
      std::vector<uint64_t> t = n.kids[1] < 0 ? ones() : bits(n.kids[1], modulus);
      std::vector<uint64_t> e = n.kids[2] < 0 ? ones() : bits(n.kids[2], modulus);
      for (size_t i = 0; i < words; ++i) c[i] = (c[i] & t[i]) | (~c[i] & e[i]);
      return c;
    }
    case Kind::kLeaf: {
      if (!n.numeric_type) return std::vector<uint64_t>(words, 0);
      std::vector<uint64_t> x = ones();
      for (int64_t d : n.divisors) {
        std::vector<uint64_t> m(words, 0);
        for (int64_t r = 0; r < modulus; r += d) m[r / 64] |= uint64_t{1} << (r % 64);
        for (size_t i = 0; i < words; ++i) x[i] &= m[i];
      }
      return x;
    }
  }
  return std::vector<uint64_t>(words, 0);
}

std::optional<std::vector<uint64_t>> NumericPredicate::residue_bits(int64_t modulus) const {
  if (modulus < 1 || modulus >= kMaxMagnitude || !periodic(0, modulus)) return std::nullopt;
  return bits(0, modulus);
}

}  // namespace deepinfer::structured
