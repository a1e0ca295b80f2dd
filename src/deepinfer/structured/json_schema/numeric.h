// Integer instances against purely numeric schemas (type, bounds, multipleOf, const, enum,
// not/allOf/anyOf/oneOf/if and local $ref), decided by arithmetic instead of the
// InstanceValidator: the multipleOf automata (residues.cc) test every value
// below a bound, and walking the schema as JSON for each one dominated their compile time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace deepinfer::structured {

class NumericPredicate {
 public:
  using Json = nlohmann::ordered_json;
  // Past this magnitude an integer may not convert to double exactly; accepts() is not asked.
  static constexpr int64_t kMaxMagnitude = int64_t{1} << 53;

  // nullopt when `schema` has a keyword outside the numeric set (or one the arithmetic does
  // not decide exactly: a non-local $ref, multipleOf that is not a short decimal, ...); the
  // caller then falls back to the InstanceValidator. `root` resolves "#/..." references.
  static std::optional<NumericPredicate> compile(const Json& root, const Json& schema);

  // Whether the integer v (|v| < kMaxMagnitude) is valid against the schema.
  bool accepts(int64_t v) const { return eval(0, v); }

  // accepts(r) for r in [0, modulus) at once, as bits (word r / 64, bit r % 64), when validity
  // is periodic in `modulus`: no bounds, no const/enum, every divisor divides it. Each node is
  // one bit-vector operation instead of `modulus` evaluations.
  std::optional<std::vector<uint64_t>> residue_bits(int64_t modulus) const;

 private:
  enum class Kind : uint8_t { kAll, kAny, kOne, kNot, kIf, kTrue, kFalse, kLeaf };
  enum class Cmp : uint8_t { kGe, kGt, kLe, kLt };
  struct Node {
    Kind kind = Kind::kAll;
    std::vector<int32_t> kids;                    // [children]; kIf: if, then, else (-1: none)
    bool numeric_type = true;                     // kLeaf: `type` admits integers
    std::vector<std::pair<double, Cmp>> bounds;   // kLeaf: x (op) bound, all must hold
    std::vector<int64_t> divisors;                // kLeaf: x divisible by each
    std::vector<std::vector<double>> value_sets;  // kLeaf: const/enum, x in each
  };
  class Builder;

  bool eval(int32_t node, int64_t v) const;
  bool periodic(int32_t node, int64_t modulus) const;
  std::vector<uint64_t> bits(int32_t node, int64_t modulus) const;

  std::vector<Node> nodes_;  // [num_nodes] node 0 is the schema itself
};

}  // namespace deepinfer::structured
