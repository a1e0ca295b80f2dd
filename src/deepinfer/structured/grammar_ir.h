// Grammar IR shared by every front end (JSON Schema, regex, EBNF): a context-free grammar
// over bytes, built through GrammarBuilder and frozen into a flat element array for matching.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::structured {

// A set of byte values (one 256-bit mask).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool intersects(const ByteSet& o) const {
    return ((bits[0] & o.bits[0]) | (bits[1] & o.bits[1]) | (bits[2] & o.bits[2]) |
            (bits[3] & o.bits[3])) != 0;
  }
  int count() const;
  bool operator==(const ByteSet&) const = default;
};

enum class ElemKind : uint8_t { kBytes, kRule, kEndAlt };

// One grammar symbol: a byte class (arg = index into byte_sets) or a rule call (arg = rule id).
struct Element {
  ElemKind kind = ElemKind::kEndAlt;
  uint32_t arg = 0;
};

using Sequence = std::vector<Element>;

// Frozen grammar. Each rule's alternatives are laid out as [elements..., kEndAlt]; a parser
// position is an index into `elements`, and a rule call's return address is its own index.
struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> rule_alts;  // [num_rules] start positions
  std::vector<std::string> rule_names;           // [num_rules]
  uint32_t root = 0;
  // Counted repetitions (seq{m,n}) as chains of rules laid out alike: chain[i] has i copies of
  // the body left. Matching is exact; context keys treat links beyond the longest token as
  // one (a token cannot tell 90 remaining copies from 900), see CompiledGrammar.
  std::vector<std::vector<uint32_t>> counted_chains;
  std::vector<uint8_t> nullable;  // [num_rules] the rule can match the empty string

  size_t num_rules() const { return rule_alts.size(); }
  std::string to_string() const;  // GBNF-like dump for debugging and docs
};

// Limits that keep a hostile schema or pattern from exhausting memory at compile time.
struct GrammarLimits {
  size_t max_elements = 4'000'000;
  double max_compile_seconds = 10.0;
  // Compile-time classification of parser contexts against the vocabulary (moves vocabulary
  // walks off the decode steps). Past any of these, the remaining contexts are done lazily.
  double precompute_seconds = 1.0;
  size_t precompute_max_contexts = 100'000;
  size_t precompute_max_bytes = size_t{256} << 20;
};

// Builds a Grammar rule by rule; helper methods lower repetition to right-recursive rules.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {});

  uint32_t new_rule(std::string name);
  void add_alt(uint32_t rule, Sequence seq);
  uint32_t rule_with_alts(std::string name, std::vector<Sequence> alts);
  size_t num_rules() const { return rules_.size(); }
  const std::string& rule_name(uint32_t r) const { return names_[r]; }

  Element bytes(const ByteSet& set);
  Element byte(uint8_t b);
  Sequence literal(std::string_view text);
  static Element call(uint32_t rule) { return {ElemKind::kRule, rule}; }

  // seq*, seq+, seq?, seq{min,max} (max < 0 = unbounded). Each returns a rule call.
  Element star(const Sequence& seq, const std::string& hint = "star");
  Element plus(const Sequence& seq, const std::string& hint = "plus");
  Element optional(const Sequence& seq, const std::string& hint = "opt");
  Element repeat(const Sequence& seq, int64_t min, int64_t max, const std::string& hint = "rep");

  // Fails when the grammar grew past its element cap or its time budget.
  Status check_budget() const;
  // Freezes the grammar; refuses left recursion (which a top-down matcher cannot run) and a
  // root that matches no string (`no_string`, if given, is that error's message); drops the
  // alternatives that need a rule matching no string, so every prefix the matcher allows can
  // be completed.
  Result<Grammar> build(uint32_t root, std::string_view no_string = {}) const;

 private:
  GrammarLimits limits_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  std::vector<ByteSet> byte_sets_;
  struct ByteSetHash {
    size_t operator()(const ByteSet& b) const {
      uint64_t h = 0;
      for (uint64_t w : b.bits) h = (h ^ w) * 0x9E3779B97F4A7C15ull;
      return static_cast<size_t>(h ^ (h >> 32));
    }
  };
  std::unordered_map<ByteSet, uint32_t, ByteSetHash> byte_set_ids_;  // each set stored once
  std::vector<std::vector<uint32_t>> chains_;
  size_t num_elements_ = 0;
  double start_seconds_ = 0;
};

// Encodes one Unicode scalar value as UTF-8.
std::string utf8_encode(uint32_t cp);

}  // namespace deepinfer::structured
