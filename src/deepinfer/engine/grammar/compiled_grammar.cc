// Vocabulary ordering and the lazy per-context token classification (see compiled_grammar.h).
#include "deepinfer/engine/grammar/compiled_grammar.h"

#include <algorithm>
#include <functional>

#include "deepinfer/engine/grammar/stack_pool.h"

namespace deepinfer::engine::grammar {

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> v)
    : grammar_(std::move(g)), vocab_(std::move(v)) {}

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::create(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab) {
  if (!vocab || vocab->size() == 0) return invalid_argument("grammar: empty vocabulary");
  const TokenVocabulary& v = *vocab;
  if (!v.is_special.empty() && v.is_special.size() != v.token_bytes.size())
    return invalid_argument("grammar: vocabulary is_special has {} entries for {} tokens",
                            v.is_special.size(), v.token_bytes.size());
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar(std::move(grammar), vocab));
  for (int32_t id : v.eos_ids)
    if (id < 0 || id >= v.size()) return invalid_argument("grammar: eos id {} out of range", id);
  cg->index_ = index_for(vocab);
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

struct CompiledGrammar::VocabIndex {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<int32_t> sorted;  // non-special, non-empty token ids in byte order
  std::vector<uint16_t> lcp;    // [sorted] common prefix with the previous sorted token
  std::vector<bool> eos;        // [vocab]
  size_t max_len = 1;
  // Token trie in preorder: node k's subtree is [k, end[k]); its children start at k + 1.
  std::vector<uint8_t> byte;     // [nodes] edge byte into the node
  std::vector<int32_t> token;    // [nodes] token ending here, or -1
  std::vector<uint32_t> end;     // [nodes]
};

std::shared_ptr<const CompiledGrammar::VocabIndex> CompiledGrammar::index_for(
    const std::shared_ptr<const TokenVocabulary>& vocab) {
  // Sorting 100k+ tokens costs milliseconds, so one index serves every grammar of a vocabulary.
  static std::mutex mu;
  static std::map<const TokenVocabulary*, std::shared_ptr<const VocabIndex>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(vocab.get());
  if (it != cache.end())
    if (it->second->vocab == vocab) return it->second;
  auto idx = std::make_shared<VocabIndex>();
  const TokenVocabulary& v = *vocab;
  idx->vocab = vocab;
  idx->eos.assign(v.size(), false);
  for (int32_t id : v.eos_ids) idx->eos[id] = true;
  for (int32_t id = 0; id < v.size(); ++id) {
    bool special = !v.is_special.empty() && v.is_special[id];
    if (!special && !v.token_bytes[id].empty()) idx->sorted.push_back(id);
  }
  std::sort(idx->sorted.begin(), idx->sorted.end(),
            [&](int32_t a, int32_t b) { return v.token_bytes[a] < v.token_bytes[b]; });
  idx->lcp.resize(idx->sorted.size(), 0);
  for (size_t i = 0; i < idx->sorted.size(); ++i) {
    const std::string& b = v.token_bytes[idx->sorted[i]];
    idx->max_len = std::max(idx->max_len, b.size());
    if (i == 0) continue;
    const std::string& a = v.token_bytes[idx->sorted[i - 1]];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n] && n < 0xFFFF) ++n;
    idx->lcp[i] = static_cast<uint16_t>(n);
  }
  // Preorder trie from the sorted list: a stack of open nodes, one per depth.
  idx->byte.push_back(0);
  idx->token.push_back(-1);
  idx->end.push_back(0);
  std::vector<uint32_t> open = {0};
  for (size_t i = 0; i < idx->sorted.size(); ++i) {
    const std::string& t = v.token_bytes[idx->sorted[i]];
    size_t keep = std::min<size_t>(idx->lcp[i], open.size() - 1);
    if (i == 0) keep = 0;
    while (open.size() > keep + 1) {
      idx->end[open.back()] = static_cast<uint32_t>(idx->byte.size());
      open.pop_back();
    }
    for (size_t d = keep; d < t.size(); ++d) {
      open.push_back(static_cast<uint32_t>(idx->byte.size()));
      idx->byte.push_back(static_cast<uint8_t>(t[d]));
      idx->token.push_back(-1);
      idx->end.push_back(0);
    }
    idx->token[open.back()] = idx->sorted[i];
  }
  while (!open.empty()) {
    idx->end[open.back()] = static_cast<uint32_t>(idx->byte.size());
    open.pop_back();
  }
  cache[vocab.get()] = idx;  // kept for the process: one per tokenizer
  return idx;
}

bool CompiledGrammar::is_eos(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(index_->eos.size()) && index_->eos[id];
}

size_t CompiledGrammar::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = grammar_.elements.size() * sizeof(Element) + grammar_.byte_sets.size() * sizeof(ByteSet);
  for (const auto& [k, c] : cache_) n += c->accepted.size() * 4 + c->uncertain.size() * 4;
  return n;
}

const TokenClasses& CompiledGrammar::classes(const ContextKey& key) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
  }
  // Computed outside the lock; a racing duplicate is discarded.
  auto fresh = compute(key);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = cache_.try_emplace(key, std::move(fresh));
  return *it->second;
}

std::unique_ptr<TokenClasses> CompiledGrammar::compute(const ContextKey& key) const {
  auto out = std::make_unique<TokenClasses>();
  out->accepted.assign(vocab_->mask_words(), 0);
  StackPool pool(&grammar_);
  // Rebuild the top frames above an unknown context (key[0] is the top).
  uint32_t s = StackPool::kContext;
  for (int i = kContextFrames - 1; i >= 0; --i)
    if (key[i] != StackPool::kNoPos) s = pool.node(s, key[i]);

  // Walk tokens in byte order, reusing the states of the common prefix (an implicit trie).
  // Stack sets are interned and their byte transitions memoized, so the walk runs on a lazily
  // built DFA: inside a string, say, almost every byte maps a set to itself.
  std::map<std::vector<uint32_t>, int32_t> intern;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<std::array<int32_t, 256>> trans;
  std::vector<uint8_t> has_ctx;
  auto set_id = [&](std::vector<uint32_t>&& v) {
    std::sort(v.begin(), v.end());
    auto [it, inserted] = intern.try_emplace(v, static_cast<int32_t>(sets.size()));
    if (inserted) {
      has_ctx.push_back(std::find(v.begin(), v.end(), StackPool::kContext) != v.end());
      sets.push_back(std::move(v));
      trans.emplace_back();
      trans.back().fill(-1);
    }
    return it->second;
  };
  const int32_t kEmpty = set_id({});
  std::vector<uint32_t> scratch;
  auto step = [&](int32_t from, uint8_t byte) {
    int32_t& t = trans[from][byte];
    if (t >= 0) return t;
    pool.advance(sets[from], byte, scratch);
    int32_t to = set_id(std::vector<uint32_t>(scratch));
    trans[from][byte] = to;  // `t` may dangle after trans grew
    return to;
  };
  // Depth-first over the trie; a dead prefix prunes its whole subtree.
  const auto& tbyte = index_->byte;
  const auto& ttoken = index_->token;
  const auto& tend = index_->end;
  auto mark_uncertain = [&](uint32_t k) {
    for (uint32_t j = k; j < tend[k]; ++j)
      if (ttoken[j] >= 0) out->uncertain.push_back(ttoken[j]);
  };
  std::function<void(uint32_t, int32_t, bool)> dfs = [&](uint32_t k, int32_t state, bool esc_before) {
    bool esc = esc_before || has_ctx[state];
    for (uint32_t c = k + 1; c < tend[k]; c = tend[c]) {
      int32_t ns = state == kEmpty ? kEmpty : step(state, tbyte[c]);
      if (ns == kEmpty) {
        if (esc) mark_uncertain(c);
        continue;
      }
      if (ttoken[c] >= 0) out->accepted[ttoken[c] >> 5] |= 1u << (ttoken[c] & 31);
      dfs(c, ns, esc);
    }
  };
  dfs(0, set_id({s}), false);
  return out;
}

}  // namespace deepinfer::engine::grammar
