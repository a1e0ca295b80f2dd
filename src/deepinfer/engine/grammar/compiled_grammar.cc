// Context classification cache and its compile-time precompute (see compiled_grammar.h).
#include "deepinfer/engine/grammar/compiled_grammar.h"

#include <chrono>
#include <functional>

#include "deepinfer/engine/grammar/context_keys.h"
#include "deepinfer/engine/grammar/stack_pool.h"

namespace deepinfer::engine::grammar {

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v)
    : grammar_(std::move(g)), vocab_(std::move(v)) {}

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, const GrammarLimits& limits) {
  if (!vocab || vocab->size() == 0) return invalid_argument("grammar: empty vocabulary");
  const TokenVocabulary& v = *vocab;
  if (!v.is_special.empty() && v.is_special.size() != v.token_bytes.size())
    return invalid_argument("grammar: vocabulary is_special has {} entries for {} tokens",
                            v.is_special.size(), v.token_bytes.size());
  for (int32_t id : v.eos_ids)
    if (id < 0 || id >= v.size()) return invalid_argument("grammar: eos id {} out of range", id);
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar(std::move(grammar), vocab));
  cg->trie_ = shared_vocab_trie(vocab);
  cg->alias_long_chains();
  cg->precompute(limits);
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

void CompiledGrammar::alias_long_chains() {
  // A token of at most max_len bytes uses at most max_len copies of a counted body, so links
  // with more copies left behave alike within any one token: key them as link A. Matching and
  // the run-time checks still use the real stack.
  const size_t a = trie_->max_len + 1;
  // Outputs rarely run far into an optional repetition (a string well under its maxLength),
  // so the links more than kEarlyLinks into one are precomputed after everything else.
  constexpr size_t kEarlyLinks = 16;
  deferred_.assign(grammar_.num_rules(), 0);
  for (const auto& chain : grammar_.counted_chains) {
    const bool optional_run = grammar_.rule_alts[chain.back()].size() == 2;
    for (size_t i = 1; optional_run && i + kEarlyLinks + 1 < chain.size(); ++i)
      if (!(chain.size() > a + 1 && i == a)) deferred_[chain[i]] = 1;
  }
  for (const auto& chain : grammar_.counted_chains) {
    if (chain.size() <= a + 1) continue;
    if (key_pos_.empty()) {
      key_pos_.resize(grammar_.elements.size());
      for (uint32_t p = 0; p < key_pos_.size(); ++p) key_pos_[p] = p;
    }
    const auto& canon = grammar_.rule_alts[chain[a]];
    for (size_t i = a + 1; i < chain.size(); ++i) {
      const auto& alts = grammar_.rule_alts[chain[i]];
      for (size_t k = 0; k < alts.size() && k < canon.size(); ++k)
        for (uint32_t o = 0;; ++o) {
          key_pos_[alts[k] + o] = canon[k] + o;
          if (grammar_.elements[alts[k] + o].kind == ElemKind::kEndAlt) break;
        }
    }
  }
}

void CompiledGrammar::precompute(const GrammarLimits& limits) {
  if (limits.precompute_seconds <= 0 || limits.precompute_max_contexts == 0) return;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  ContextGraph graph(grammar_, key_pos_);
  ContextWalker walker(&grammar_, trie_);
  size_t done = 0;
  bool stopped = false;
  auto over_budget = [&] {
    if (stopped) return true;
    stopped = done >= limits.precompute_max_contexts || cache_bytes_ > limits.precompute_max_bytes ||
              std::chrono::duration<double>(Clock::now() - t0).count() > limits.precompute_seconds;
    return stopped;
  };
  // Each byte position's shallowest key, then deeper keys only below those that ask for it
  // (the same order of refinement GrammarMatcher uses to look them up).
  std::function<void(ContextKey, int)> visit = [&](ContextKey key, int depth) {
    if (over_budget()) return;
    auto c = walker.classify(key);
    bool refine = c->refine;
    cache_bytes_ += c->memory_bytes();
    cache_.emplace(key, std::move(c));
    ++done;
    if (!refine) return;
    for (uint32_t f : graph.frames_below(key[depth - 1])) {
      ContextKey deeper = key;
      deeper[depth] = f;
      visit(deeper, depth + 1);
      if (stopped) return;
    }
  };
  for (int pass = 0; pass < 2 && !stopped; ++pass)
    for (uint32_t p : graph.positions()) {
      if (deferred_[graph.rule_of(p)] != pass) continue;
      visit({p, StackPool::kNoPos, StackPool::kNoPos, StackPool::kNoPos}, 1);
      if (stopped) break;
    }
  stats_.precomputed = done;
  stats_.complete = !stopped;
}

bool CompiledGrammar::is_eos(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(trie_->eos.size()) && trie_->eos[id];
}

size_t CompiledGrammar::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return grammar_.elements.size() * sizeof(Element) + grammar_.byte_sets.size() * sizeof(ByteSet) +
         cache_bytes_;
}

ContextStats CompiledGrammar::context_stats() const {
  ContextStats s = stats_;
  s.lazy = lazy_.load();
  return s;
}

const TokenClasses& CompiledGrammar::classes(const ContextKey& key) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
  }
  // Computed outside the lock; a racing duplicate is discarded.
  ContextWalker walker(&grammar_, trie_);
  auto fresh = walker.classify(key);
  lazy_++;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = cache_.try_emplace(key, std::move(fresh));
  if (inserted) cache_bytes_ += it->second->memory_bytes();
  return *it->second;
}

}  // namespace deepinfer::engine::grammar
