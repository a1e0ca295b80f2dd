// Vocabulary classification for one context (see context_walker.h): a linear scan of the
// preorder trie over a lazily built DFA of stack sets; a dead prefix skips its subtree.
#include "deepinfer/engine/grammar/context_walker.h"

#include <algorithm>

namespace deepinfer::engine::grammar {

int key_depth(const ContextKey& k) {
  int d = 0;
  while (d < kContextFrames && k[d] != StackPool::kNoPos) ++d;
  return d;
}

bool key_is_final(const ContextKey& k) {
  int d = key_depth(k);
  return d == kContextFrames || (d > 0 && k[d - 1] == kStackEnd);
}

void TokenClasses::add_accepted(uint32_t* mask) const {
  if (!accepted_bits.empty()) {
    const size_t n = accepted_bits.size();
    const uint32_t* a = accepted_bits.data();
    for (size_t w = 0; w < n; ++w) mask[w] |= a[w];
    return;
  }
  for (int32_t id : accepted_ids) mask[id >> 5] |= 1u << (id & 31);
}

size_t TokenClasses::memory_bytes() const {
  return sizeof(*this) + accepted_bits.size() * 4 + accepted_ids.size() * 4 + uncertain.size() * 6;
}

size_t ContextWalker::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

ContextWalker::ContextWalker(const Grammar* g, std::shared_ptr<const VocabTrie> trie)
    : g_(g), trie_(std::move(trie)) {
  state_at_.resize(trie_->max_len + 2);
  esc_at_.resize(trie_->max_len + 2);
  // Partition the bytes by which of the grammar's byte classes contain them.
  std::vector<std::vector<uint64_t>> sig(256, std::vector<uint64_t>((g_->byte_sets.size() + 63) / 64));
  for (size_t i = 0; i < g_->byte_sets.size(); ++i)
    for (int b = 0; b < 256; ++b)
      if (g_->byte_sets[i].test(static_cast<uint8_t>(b))) sig[b][i >> 6] |= uint64_t{1} << (i & 63);
  std::vector<int> rep;  // a representative byte per column
  for (int b = 0; b < 256; ++b) {
    int col = -1;
    for (size_t c = 0; c < rep.size() && col < 0; ++c)
      if (sig[rep[c]] == sig[b]) col = static_cast<int>(c);
    if (col < 0) {
      col = static_cast<int>(rep.size());
      rep.push_back(b);
    }
    byte_col_[b] = static_cast<uint8_t>(col);
  }
  num_cols_ = static_cast<int>(rep.size());
}

int32_t ContextWalker::intern(std::vector<uint32_t>& v) {
  std::sort(v.begin(), v.end());
  auto [it, inserted] = intern_.try_emplace(v, static_cast<int32_t>(sets_.size()));
  if (inserted) {
    has_ctx_.push_back(std::find(v.begin(), v.end(), StackPool::kContext) != v.end());
    sets_.push_back(v);
    trans_.resize(trans_.size() + num_cols_, -1);
  }
  return it->second;
}

int32_t ContextWalker::step(int32_t from, uint8_t byte) {
  size_t cell = static_cast<size_t>(from) * num_cols_ + byte_col_[byte];
  if (trans_[cell] >= 0) return trans_[cell];
  pool_->advance(sets_[from], byte, scratch_);
  int32_t to = intern(scratch_);
  trans_[cell] = to;  // interning may have grown trans_, so index again
  return to;
}

std::unique_ptr<TokenClasses> ContextWalker::classify(const ContextKey& key) {
  const VocabTrie& t = *trie_;
  const int32_t words = t.vocab->mask_words();
  pool_ = std::make_unique<StackPool>(g_);
  intern_.clear();
  sets_.clear();
  trans_.clear();
  has_ctx_.clear();
  // Rebuild the known frames above the accept state (kStackEnd) or an unknown rest (kContext).
  const int known = key_depth(key);
  const bool can_refine = !key_is_final(key);
  uint32_t s = StackPool::kContext;
  for (int i = known - 1; i >= 0; --i)
    s = key[i] == kStackEnd ? StackPool::kAccept : pool_->node(s, key[i]);
  scratch_.clear();
  const int32_t kEmpty = intern(scratch_);
  scratch_.assign(1, s);
  state_at_[0] = intern(scratch_);
  esc_at_[0] = has_ctx_[state_at_[0]];

  std::vector<int32_t> accepted;
  auto out = std::make_unique<TokenClasses>();
  const uint8_t* byte = t.byte.data();
  const uint32_t* depth = t.depth.data();
  const uint32_t* end = t.end.data();
  const uint32_t* tok_begin = t.tok_begin.data();
  const int32_t* tokens = t.tokens.data();
  const uint32_t n = static_cast<uint32_t>(t.num_nodes());
  for (uint32_t k = 1; k < n;) {
    const uint32_t d = depth[k];
    const int32_t from = state_at_[d - 1];
    int32_t ns = trans_[static_cast<size_t>(from) * num_cols_ + byte_col_[byte[k]]];
    if (ns < 0) ns = step(from, byte[k]);
    if (ns == kEmpty) {
      // The whole subtree shares this dead prefix; it is uncertain only if some path popped
      // below the known frames on the way (the real stack might continue it).
      if (esc_at_[d - 1]) {
        out->uncertain.insert(out->uncertain.end(), tokens + tok_begin[k], tokens + tok_begin[end[k]]);
        if (can_refine && out->uncertain.size() > kRefineUncertain) {
          out = std::make_unique<TokenClasses>();
          out->refine = true;
          return out;
        }
      }
      k = end[k];
      continue;
    }
    for (uint32_t i = tok_begin[k]; i < tok_begin[k + 1]; ++i) accepted.push_back(tokens[i]);
    state_at_[d] = ns;
    esc_at_[d] = esc_at_[d - 1] | has_ctx_[ns];
    ++k;
  }
  if (accepted.size() >= static_cast<size_t>(words)) {
    out->accepted_bits.assign(words, 0);
    for (int32_t id : accepted) out->accepted_bits[id >> 5] |= 1u << (id & 31);
  } else {
    out->accepted_ids = std::move(accepted);
  }
  // Common prefixes between consecutive uncertain tokens (they are in byte order).
  const auto& tb = t.vocab->token_bytes;
  out->uncertain_lcp.resize(out->uncertain.size(), 0);
  for (size_t i = 1; i < out->uncertain.size(); ++i) {
    const std::string& a = tb[out->uncertain[i - 1]];
    const std::string& b = tb[out->uncertain[i]];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l] && l < 0xFFFF) ++l;
    out->uncertain_lcp[i] = static_cast<uint16_t>(l);
  }
  return out;
}

}  // namespace deepinfer::engine::grammar
