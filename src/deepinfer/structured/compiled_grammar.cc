// Context classification cache and its compile-time precompute (see compiled_grammar.h).
#include "deepinfer/structured/compiled_grammar.h"

#include <chrono>

#include "deepinfer/structured/masks/context_keys.h"
#include "deepinfer/structured/masks/scan_grammar.h"
#include "deepinfer/structured/stack_pool.h"

namespace deepinfer::structured {

// Resumable depth-first precompute: each byte position's shallowest key, then deeper keys
// only below those that ask for it (the order GrammarMatcher looks them up in).
struct CompiledGrammar::PrecomputeState {
  GrammarLimits limits;
  ContextWalker walker;
  std::unique_ptr<ContextGraph> graph;  // built on the first slice (not on the ready path)
  std::vector<uint32_t> order;          // positions: early ones first, deferred ones after
  size_t next = 0;
  std::vector<std::pair<ContextKey, int>> todo;  // keys still to classify, last = next
  double spent_seconds = 0;
};

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v)
    : grammar_(std::move(g)), vocab_(std::move(v)), caches_(std::make_unique<Caches>()) {}

CompiledGrammar::~CompiledGrammar() = default;

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab, const GrammarLimits& limits,
    Precompute mode) {
  if (!vocab || vocab->size() == 0) return invalid_argument("grammar: empty vocabulary");
  const TokenVocabulary& v = *vocab;
  if (!v.is_special.empty() && v.is_special.size() != v.token_bytes.size())
    return invalid_argument("grammar: vocabulary is_special has {} entries for {} tokens",
                            v.is_special.size(), v.token_bytes.size());
  for (int32_t id : v.eos_ids)
    if (id < 0 || id >= v.size()) return invalid_argument("grammar: eos id {} out of range", id);
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar(std::move(grammar), vocab));
  cg->trie_ = shared_vocab_trie(vocab);
  cg->columns_ = byte_columns(cg->grammar_);
  cg->alias_long_chains();
  if (limits.precompute_seconds > 0 && limits.precompute_max_contexts > 0) {
    cg->caches_->precompute.reset(new PrecomputeState{
        limits, ContextWalker(&cg->scan_grammar(), cg->trie_, cg->columns_), {}, {}, 0, {}, 0});
    cg->caches_->pending = true;
    if (mode == Precompute::kBeforeReturn)
      while (cg->precompute_more(1e9)) {
      }
    else if (mode == Precompute::kInBackground)
      cg->classify_start_contexts();
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

ContextKey CompiledGrammar::key_of(const StackPool& pool, uint32_t stack, int depth) const {
  ContextKey key;
  key.fill(StackPool::kNoPos);
  uint32_t s = stack;
  for (int i = 0; i < depth; ++i) {
    if (s == StackPool::kAccept) {
      key[i] = kStackEnd;
      break;
    }
    key[i] = key_pos(pool.pos(s));
    s = pool.parent(s);
  }
  return key;
}

void CompiledGrammar::classify_start_contexts() const {
  // The contexts GrammarMatcher::find_classes_of looks up for the initial stacks: each
  // stack's shallowest key that is not refined (a final key never is), and the shallower
  // ones on the way.
  const size_t lazy_before = caches_->lazy.load();
  StackPool pool(&grammar_);
  for (uint32_t s : pool.initial(grammar_.root)) {
    if (s == StackPool::kAccept) continue;
    for (int d = 1; d <= kContextFrames; ++d)
      if (!classes(key_of(pool, s, d)).refine) break;
  }
  // classes() counts them as classified on first use; they are ahead of use.
  const size_t n = caches_->lazy.load() - lazy_before;
  caches_->lazy -= n;
  caches_->precomputed += n;
}

void CompiledGrammar::alias_long_chains() {
  // A token of at most max_len bytes uses at most max_len copies of a counted body, so links
  // with more copies left behave alike within any one token: key them as link A. Matching and
  // the run-time checks still use the real stack.
  const size_t a = trie_->max_len + 1;
  // Outputs rarely run far into an optional repetition (a string well under its maxLength),
  // so the links more than kEarlyLinks into one are precomputed after everything else.
  constexpr size_t kEarlyLinks = 16;
  scan_grammar_ = loop_long_chains(grammar_, trie_->max_len);
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

bool CompiledGrammar::precompute_more(double seconds) const {
  using Clock = std::chrono::steady_clock;
  std::lock_guard<std::mutex> pre_lock(caches_->precompute_mu);
  if (!caches_->precompute) return false;
  PrecomputeState& st = *caches_->precompute;
  const auto t0 = Clock::now();
  if (!st.graph) {
    st.graph = std::make_unique<ContextGraph>(grammar_, key_pos_);
    for (int pass = 0; pass < 2; ++pass)
      for (uint32_t p : st.graph->positions())
        if (deferred_[st.graph->rule_of(p)] == pass) st.order.push_back(p);
  }
  bool finished = false;
  while (true) {
    if (st.todo.empty()) {
      if (st.next == st.order.size()) {
        finished = true;
        break;
      }
      st.todo.push_back(
          {{st.order[st.next++], StackPool::kNoPos, StackPool::kNoPos, StackPool::kNoPos}, 1});
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    size_t bytes;
    {
      std::lock_guard<base::SpinMutex> lock(caches_->mu);
      bytes = caches_->bytes;
    }
    if (st.spent_seconds + elapsed > st.limits.precompute_seconds ||
        caches_->precomputed.load() >= st.limits.precompute_max_contexts ||
        bytes > st.limits.precompute_max_bytes)
      break;  // budget spent: the rest is classified on first use
    if (elapsed > seconds) {
      st.spent_seconds += elapsed;
      caches_->precompute_ms = st.spent_seconds * 1e3;
      return true;
    }
    auto [key, depth] = st.todo.back();
    st.todo.pop_back();
    bool refine;
    if (const TokenClasses* known = cached_classes(key)) {
      refine = known->refine;  // classified lazily by a matcher already
    } else {
      // A deeper key is pushed only after its shallower key is cached.
      const TokenClasses* shallower = depth > 1 ? cached_classes(shallower_key(key)) : nullptr;
      if (shallower && !shallower->complete()) shallower = nullptr;
      auto c = shallower ? st.walker.classify_below(key, *shallower) : st.walker.classify(key);
      caches_->nodes_visited += st.walker.last_visits();
      refine = c->refine;
      std::lock_guard<base::SpinMutex> lock(caches_->mu);
      auto [kept, inserted] = caches_->table.insert(key, std::move(c));
      if (inserted) caches_->bytes += kept->memory_bytes();
      caches_->precomputed++;
    }
    if (!refine) continue;
    const std::vector<uint32_t>& below = st.graph->frames_below(key[depth - 1]);
    for (size_t i = below.size(); i-- > 0;) {  // reversed: the first frame is visited first
      ContextKey deeper = key;
      deeper[depth] = below[i];
      st.todo.push_back({deeper, depth + 1});
    }
  }
  st.spent_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  caches_->precompute_ms = st.spent_seconds * 1e3;
  caches_->complete = finished;
  caches_->precompute.reset();
  caches_->pending.store(false, std::memory_order_release);
  return false;
}

bool CompiledGrammar::is_eos(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(trie_->eos.size()) && trie_->eos[id];
}

size_t CompiledGrammar::memory_bytes() const {
  std::lock_guard<base::SpinMutex> lock(caches_->mu);
  const size_t scan_bytes = scan_grammar_ ? scan_grammar_->elements.size() * sizeof(Element) : 0;
  return grammar_.elements.size() * sizeof(Element) + grammar_.byte_sets.size() * sizeof(ByteSet) +
         scan_bytes + caches_->bytes;
}

ContextStats CompiledGrammar::context_stats() const {
  ContextStats s;
  s.precomputed = caches_->precomputed.load();
  s.lazy = caches_->lazy.load();
  s.direct_masks = caches_->direct_masks.load();
  s.complete = caches_->complete.load();
  s.pending = caches_->pending.load();
  s.precompute_ms = caches_->precompute_ms.load();
  s.nodes_visited = caches_->nodes_visited.load();
  return s;
}

const TokenClasses* CompiledGrammar::cached_classes(const ContextKey& key) const {
  std::lock_guard<base::SpinMutex> lock(caches_->mu);
  return caches_->table.find(key);
}

const TokenClasses* CompiledGrammar::cached_classes_for(const ContextKey& deepest) const {
  ContextKey key;
  key.fill(StackPool::kNoPos);
  std::lock_guard<base::SpinMutex> lock(caches_->mu);
  for (int d = 1; d <= kContextFrames; ++d) {
    key[d - 1] = deepest[d - 1];
    const TokenClasses* c = caches_->table.find(key);
    if (!c || !c->refine || d == kContextFrames) return c;
  }
  return nullptr;
}

std::shared_ptr<const TokenClasses> CompiledGrammar::set_classes(
    const std::vector<ContextKey>& keys) const {
  {
    std::lock_guard<base::SpinMutex> lock(caches_->mu);
    auto it = caches_->set_classes.find(keys);
    if (it != caches_->set_classes.end()) return it->second;
  }
  std::shared_ptr<const TokenClasses> fresh =
      classify_off_precompute([&](ContextWalker& w) { return w.classify_set(keys); });
  caches_->direct_masks++;
  std::lock_guard<base::SpinMutex> lock(caches_->mu);
  if (caches_->set_classes.size() < kMaxSetClasses) {
    auto [it, inserted] = caches_->set_classes.try_emplace(keys, fresh);
    if (inserted) caches_->bytes += fresh->memory_bytes();
    return it->second;
  }
  return fresh;
}

std::unique_ptr<TokenClasses> CompiledGrammar::classify_off_precompute(
    const std::function<std::unique_ptr<TokenClasses>(ContextWalker&)>& classify) const {
  // One walker is kept so classifications outside the precompute share its DFA; a second
  // thread meanwhile uses a fresh one.
  std::unique_ptr<TokenClasses> out;
  if (std::unique_lock<std::mutex> walker_lock(caches_->lazy_walker_mu, std::try_to_lock);
      walker_lock.owns_lock()) {
    if (!caches_->lazy_walker) caches_->lazy_walker = std::make_unique<ContextWalker>(&scan_grammar(), trie_, columns_);
    out = classify(*caches_->lazy_walker);
    caches_->nodes_visited += caches_->lazy_walker->last_visits();
  } else {
    ContextWalker walker(&scan_grammar(), trie_, columns_);
    out = classify(walker);
    caches_->nodes_visited += walker.last_visits();
  }
  return out;
}

const TokenClasses& CompiledGrammar::classes(const ContextKey& key) const {
  {
    std::lock_guard<base::SpinMutex> lock(caches_->mu);
    if (const TokenClasses* known = caches_->table.find(key)) return *known;
  }
  // Computed outside the cache lock; a racing duplicate is discarded. One walker is kept so
  // lazy classifications share its DFA; a second thread meanwhile uses a fresh one.
  // A deeper key's classification is derived from its shallower key's (classified first).
  const TokenClasses* shallower = key_depth(key) > 1 ? &classes(shallower_key(key)) : nullptr;
  if (shallower && !shallower->complete()) shallower = nullptr;
  std::unique_ptr<TokenClasses> fresh = classify_off_precompute([&](ContextWalker& w) {
    return shallower ? w.classify_below(key, *shallower) : w.classify(key);
  });
  caches_->lazy++;
  std::lock_guard<base::SpinMutex> lock(caches_->mu);
  auto [kept, inserted] = caches_->table.insert(key, std::move(fresh));
  if (inserted) caches_->bytes += kept->memory_bytes();
  return *kept;
}

}  // namespace deepinfer::structured
