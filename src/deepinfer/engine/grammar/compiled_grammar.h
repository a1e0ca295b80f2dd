// A grammar bound to a vocabulary, plus the per-parser-context token classification that makes
// masks cheap: for each top-of-stack context, tokens accepted or rejected regardless of what
// lies deeper in the stack are stored; only the rest are checked at run time. Contexts are
// classified ahead of time on the compile worker (within a budget), the rest on first use.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/grammar/context_walker.h"
#include "deepinfer/engine/grammar/grammar_ir.h"
#include "deepinfer/engine/grammar/token_vocabulary.h"

namespace deepinfer::engine::grammar {

struct ContextStats {
  size_t precomputed = 0;  // classified on the compile worker
  size_t lazy = 0;         // classified later, inside a mask call
  bool complete = false;   // every reachable context was precomputed within the budget
};

class CompiledGrammar {
 public:
  // Precomputes context classes within limits.precompute_* (GrammarLimits in grammar_ir.h).
  static Result<std::shared_ptr<const CompiledGrammar>> create(
      Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, const GrammarLimits& limits = {});

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  bool is_eos(int32_t id) const;
  size_t memory_bytes() const;
  ContextStats context_stats() const;

  // The classification for a top-of-stack context; computed on first use when the compile
  // worker did not get to it (thread-safe; the reference stays valid for the grammar's life).
  const TokenClasses& classes(const ContextKey& key) const;
  // The position a context key uses for grammar position p (see Grammar::counted_chains).
  uint32_t key_pos(uint32_t p) const { return key_pos_.empty() ? p : key_pos_[p]; }

 private:
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v);
  void alias_long_chains();
  void precompute(const GrammarLimits& limits);

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::shared_ptr<const VocabTrie> trie_;
  std::vector<uint32_t> key_pos_;  // [elements] or empty when no chain is long enough
  std::vector<uint8_t> deferred_;  // [rules] precomputed last: deep into an optional run
  mutable std::mutex mu_;
  mutable std::unordered_map<ContextKey, std::unique_ptr<TokenClasses>, ContextKeyHash> cache_;
  mutable size_t cache_bytes_ = 0;
  ContextStats stats_;
  mutable std::atomic<size_t> lazy_{0};
};

}  // namespace deepinfer::engine::grammar
