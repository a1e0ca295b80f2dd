// Vocabulary ordering and the lazy per-context token classification (see compiled_grammar.h).
#include "deepinfer/engine/grammar/compiled_grammar.h"

#include <algorithm>

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
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar(std::move(grammar), std::move(vocab)));
  cg->eos_.assign(v.size(), false);
  for (int32_t id : v.eos_ids) {
    if (id < 0 || id >= v.size()) return invalid_argument("grammar: eos id {} out of range", id);
    cg->eos_[id] = true;
  }
  for (int32_t id = 0; id < v.size(); ++id) {
    bool special = !v.is_special.empty() && v.is_special[id];
    if (!special && !v.token_bytes[id].empty()) cg->sorted_.push_back(id);
  }
  std::sort(cg->sorted_.begin(), cg->sorted_.end(),
            [&](int32_t a, int32_t b) { return v.token_bytes[a] < v.token_bytes[b]; });
  cg->lcp_.resize(cg->sorted_.size(), 0);
  for (size_t i = 1; i < cg->sorted_.size(); ++i) {
    const std::string& a = v.token_bytes[cg->sorted_[i - 1]];
    const std::string& b = v.token_bytes[cg->sorted_[i]];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n] && n < 0xFFFF) ++n;
    cg->lcp_[i] = static_cast<uint16_t>(n);
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

bool CompiledGrammar::is_eos(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(eos_.size()) && eos_[id];
}

size_t CompiledGrammar::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = grammar_.elements.size() * sizeof(Element) + sorted_.size() * 6;
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
  // states[d]: stacks after d bytes; escaped[d]: some path left the known frames with bytes
  // still to consume, so the token's fate depends on the deeper stack.
  size_t max_len = 1;
  for (int32_t id : sorted_) max_len = std::max(max_len, vocab_->token_bytes[id].size());
  std::vector<std::vector<uint32_t>> states(max_len + 1);
  std::vector<uint8_t> escaped(max_len + 1, 0);
  states[0] = {s};
  size_t valid_depth = 0;
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& tok = vocab_->token_bytes[sorted_[i]];
    size_t d = std::min<size_t>(lcp_[i], valid_depth);
    for (; d < tok.size(); ++d) {
      const auto& cur = states[d];
      bool esc_here = std::find(cur.begin(), cur.end(), StackPool::kContext) != cur.end();
      escaped[d + 1] = escaped[d] || esc_here;
      if (cur.empty() || (cur.size() == 1 && esc_here)) {
        states[d + 1].clear();
      } else {
        pool.advance(cur, static_cast<uint8_t>(tok[d]), states[d + 1]);
      }
    }
    valid_depth = tok.size();
    int32_t id = sorted_[i];
    if (!states[tok.size()].empty()) {
      out->accepted[id >> 5] |= 1u << (id & 31);
    } else if (escaped[tok.size()]) {
      out->uncertain.push_back(id);
    }
  }
  return out;
}

}  // namespace deepinfer::engine::grammar
