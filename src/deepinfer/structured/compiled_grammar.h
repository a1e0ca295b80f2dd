// A grammar bound to a vocabulary, plus the per-parser-context token classification that makes
// masks cheap: for each top-of-stack context, tokens accepted or rejected regardless of what
// lies deeper in the stack are stored; only the rest are checked at run time. Contexts are
// classified ahead of time (within a budget): before create() returns, or, for a grammar
// created with Precompute::kInBackground, by precompute_more() calls on a background thread
// while requests already use the grammar; the rest on first use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/spin_mutex.h"
#include "deepinfer/base/status.h"
#include "deepinfer/structured/masks/context_table.h"
#include "deepinfer/structured/masks/context_walker.h"
#include "deepinfer/structured/grammar_ir.h"
#include "deepinfer/structured/masks/token_vocabulary.h"

namespace deepinfer::structured {

struct ContextStats {
  size_t precomputed = 0;    // classified ahead of use (compile worker or background)
  size_t lazy = 0;           // classified later, inside a mask call
  size_t direct_masks = 0;   // key sets scanned at once: the precompute had not reached them
  bool complete = false;     // every reachable context was precomputed within the budget
  bool pending = false;      // the background precompute has not finished yet
  double precompute_ms = 0;  // time spent precomputing so far
  size_t nodes_visited = 0;  // vocabulary-trie nodes the classifications visited, all threads
};

class CompiledGrammar {
 public:
  // kBeforeReturn: classifies contexts within limits.precompute_* (GrammarLimits in
  // grammar_ir.h) before returning. kInBackground: classifies the first mask's contexts
  // (tens of microseconds) and returns; the owner calls precompute_more() off the serving
  // path until it returns false. kOnFirstUse: as kInBackground without the first mask's
  // contexts; an owner that never calls precompute_more() has every context classified by
  // the first mask that needs it (`bench --grammar-precompute none`).
  enum class Precompute { kBeforeReturn, kInBackground, kOnFirstUse };
  static Result<std::shared_ptr<const CompiledGrammar>> create(
      Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
      const GrammarLimits& limits = {}, Precompute mode = Precompute::kBeforeReturn);
  ~CompiledGrammar();

  const Grammar& grammar() const { return grammar_; }
  // What the vocabulary scans step: the grammar with long counted runs looped (see
  // scan_grammar.h), or the grammar itself when it has none.
  const Grammar& scan_grammar() const { return scan_grammar_ ? *scan_grammar_ : grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  bool is_eos(int32_t id) const;
  size_t memory_bytes() const;
  ContextStats context_stats() const;

  // The classification for a top-of-stack context; computed on first use when the compile
  // worker did not get to it (thread-safe; the reference stays valid for the grammar's life).
  const TokenClasses& classes(const ContextKey& key) const;
  // The classification if it is computed already, else null (never computes).
  const TokenClasses* cached_classes(const ContextKey& key) const;
  // What a matcher uses for a stack whose kContextFrames-deep key is `deepest`: the
  // classification of its shallowest prefix key that is not marked for refinement (or of
  // the deepest), when it and every shallower prefix key are computed already; else null.
  // One lock for all depths.
  const TokenClasses* cached_classes_for(const ContextKey& deepest) const;
  // The classification of a whole stack set's keys (sorted, each kContextFrames deep or to
  // the stack's end) by one scan of the vocabulary, kept per key set (up to kMaxSetClasses):
  // for a mask that overtakes the background precompute, cheaper than classifying each of
  // its contexts (a scan per key depth each), and the same keys come back with other deeper
  // stacks (every token inside a bounded string, each item of an array).
  std::shared_ptr<const TokenClasses> set_classes(const std::vector<ContextKey>& keys) const;
  // Classifies more contexts for about `seconds` (one thread at a time); false once nothing
  // is left to do (finished, or the precompute budget is spent).
  bool precompute_more(double seconds) const;
  // The background precompute has work left (a context it has not reached yet is classified
  // by the first mask that needs it, and shared).
  bool precompute_pending() const { return caches_->pending.load(std::memory_order_acquire); }
  // The position a context key uses for grammar position p (see Grammar::counted_chains).
  uint32_t key_pos(uint32_t p) const { return key_pos_.empty() ? p : key_pos_[p]; }
  // The context key of `stack` (of `pool`, over grammar()) cut to its top `depth` frames, or
  // to its end (kStackEnd) when shorter.
  ContextKey key_of(const StackPool& pool, uint32_t stack, int depth) const;

 private:
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v);
  void alias_long_chains();
  // Classifies the contexts of the grammar's initial stacks (the first mask's), with the
  // walker later masks use for contexts the precompute has not reached: a grammar returned
  // for background precompute answers its first mask from the cache, and the walker is
  // built already. Tens of microseconds.
  void classify_start_contexts() const;
  // Runs `classify` on the kept lazy walker (or a fresh one while another thread holds it)
  // for a mask that overtook the precompute.
  std::unique_ptr<TokenClasses> classify_off_precompute(
      const std::function<std::unique_ptr<TokenClasses>(ContextWalker&)>& classify) const;
  struct PrecomputeState;

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::shared_ptr<const VocabTrie> trie_;
  ByteColumns columns_;
  std::vector<uint32_t> key_pos_;  // [elements] or empty when no chain is long enough
  std::unique_ptr<Grammar> scan_grammar_;  // null when no chain is long enough
  std::vector<uint8_t> deferred_;  // [rules] precomputed last: deep into an optional run
  struct KeySetHash {
    size_t operator()(const std::vector<ContextKey>& keys) const {
      size_t h = keys.size();
      for (const auto& k : keys) h = h * 0x9E3779B97F4A7C15ull ^ ContextKeyHash()(k);
      return h;
    }
  };
  static constexpr size_t kMaxSetClasses = 1024;
  // The only part of a compiled grammar that changes after create(): the context
  // classifications that masks and the background precompute fill in as they need them, with
  // their locks and counters. The grammar holds it by pointer, so every other member stays as
  // create() left it and the grammar can be shared as const by any number of requests.
  struct Caches {
    // Guards table, set_classes and bytes. Every mask looks contexts up under it while the
    // background precompute inserts: sections are short, so waiters spin, not sleep.
    base::SpinMutex mu;
    ContextTable table;
    std::unordered_map<std::vector<ContextKey>, std::shared_ptr<const TokenClasses>, KeySetHash> set_classes;
    size_t bytes = 0;
    // The precompute's resumable state (positions still to visit, refinements pending); only
    // the thread holding precompute_mu touches it. Freed when the precompute ends.
    std::mutex precompute_mu;
    std::unique_ptr<PrecomputeState> precompute;
    std::atomic<bool> pending{false};
    std::mutex lazy_walker_mu;
    std::unique_ptr<ContextWalker> lazy_walker;  // classes() of contexts not precomputed (yet)
    std::atomic<size_t> precomputed{0}, lazy{0}, direct_masks{0}, nodes_visited{0};
    std::atomic<bool> complete{false};
    std::atomic<double> precompute_ms{0};
  };
  const std::unique_ptr<Caches> caches_;  // never null
};

}  // namespace deepinfer::structured
