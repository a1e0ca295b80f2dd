// Per-request token-level matcher: allowed-token bitmask for the next step, accept, rollback
// (for speculative decoding) and jump-forward (bytes the grammar forces next).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/structured/compiled_grammar.h"
#include "deepinfer/structured/stack_pool.h"

namespace deepinfer::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // mask: vocab().mask_words() words; bit i set = token i allowed. EOS only when complete.
  void fill_next_token_bitmask(uint32_t* mask);
  // Advances on a token; false (state unchanged) when the grammar forbids it.
  bool accept_token(int32_t id);
  // Advances on raw bytes (tests, jump-forward); false and unchanged when not a valid prefix.
  bool accept_bytes(const std::string& bytes);
  // Undoes the last n accepted tokens (n <= num_accepted()).
  void rollback(int n);
  int num_accepted() const { return static_cast<int>(history_.size()) - 1; }
  // The grammar can end here (EOS would be allowed).
  bool can_terminate() const;
  // An EOS token has been accepted.
  bool is_terminated() const { return terminated_.back(); }
  // Bytes every continuation must start with (empty when there is a choice).
  std::string find_jump_forward_string();
  void reset();

  const CompiledGrammar& compiled() const { return *cg_; }

 private:
  // While the precompute runs, a mask classifies at most this many missing contexts itself;
  // past it, it scans the vocabulary once for its whole key set instead.
  static constexpr size_t kMaxContextsClassifiedPerMask = 2;
  // The classification of `stack`'s context (kept per stack id). With compute, missing keys
  // are classified now; without, null when one is not computed yet.
  const TokenClasses* find_classes_of(uint32_t stack, bool compute);
  // While the precompute has not reached these stacks' contexts: one scan for the set of
  // their deepest keys (kept by the grammar per key set), then its uncertain tokens checked.
  void fill_mask_by_key_set(const std::vector<uint32_t>& stacks, uint32_t* mask);
  // Sets the bits of `c`'s uncertain tokens that some stack of the real set `stacks` accepts.
  void check_uncertain(const std::vector<uint32_t>& stacks, const TokenClasses& c, uint32_t* mask);

  std::shared_ptr<const CompiledGrammar> cg_;
  StackPool pool_;
  std::vector<std::vector<uint32_t>> history_;  // [accepted + 1] stack sets
  std::vector<bool> terminated_;                // [accepted + 1]
  std::vector<uint32_t> scratch_a_, scratch_b_;
  std::vector<const TokenClasses*> classes_of_;     // [pool nodes] cached per stack id
  std::vector<std::vector<uint32_t>> prefix_sets_;  // [bytes + 1] states along a token
  std::vector<ContextKey> key_set_;   // fill_mask_by_key_set's keys
  std::vector<uint32_t> one_stack_;   // check_uncertain's set for one stack
  std::vector<uint32_t> missing_, known_;  // stacks without / with a classified context
};

}  // namespace deepinfer::structured
