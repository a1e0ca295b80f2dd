// BPE merge loop (see bpe.h). Merges are applied lowest rank first, leftmost first among
// equal ranks, with a heap so that long words (whitespace runs) stay O(n log n).
#include "deepinfer/recipe/bpe.h"

#include <optional>
#include <queue>

namespace deepinfer::recipe {

BpeModel::BpeModel(BpeModel&& o) noexcept { *this = std::move(o); }

BpeModel& BpeModel::operator=(BpeModel&& o) noexcept {
  if (this == &o) return *this;
  vocab_ = std::move(o.vocab_);
  merges_ = std::move(o.merges_);
  std::copy(std::begin(o.byte_ids_), std::end(o.byte_ids_), std::begin(byte_ids_));
  ignore_merges_ = o.ignore_merges_;
  std::lock_guard<std::mutex> lock(o.cache_mu_);
  cache_ = std::move(o.cache_);
  return *this;
}

Result<BpeModel> BpeModel::build(const std::vector<std::string>& token_bytes,
                                 const std::vector<bool>& mergeable,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 bool ignore_merges) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  const auto n = static_cast<int32_t>(token_bytes.size());
  m.vocab_.reserve(token_bytes.size() * 2);
  // Ordinary tokens first, so that a special token spelled like a normal one never wins.
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t id = 0; id < n; ++id) {
      if (token_bytes[id].empty() || mergeable[id] != (pass == 0)) continue;
      m.vocab_.emplace(token_bytes[id], id);
    }
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.vocab_.find(std::string(1, static_cast<char>(b)));
    m.byte_ids_[b] = (it != m.vocab_.end() && mergeable[it->second]) ? it->second : -1;
  }
  m.merges_.reserve(merges.size() * 2);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = m.vocab_.find(a), ib = m.vocab_.find(b), ir = m.vocab_.find(a + b);
    if (ia == m.vocab_.end() || ib == m.vocab_.end() || ir == m.vocab_.end()) {
      return corrupt("BPE merge #{} ('{}' + '{}') names a token missing from the vocabulary",
                     rank, a, b);
    }
    // An earlier (better) rank for the same pair wins, as in HF.
    m.merges_.emplace(pair_key(ia->second, ib->second),
                      MergeInfo{static_cast<int32_t>(rank), ir->second});
  }
  return m;
}

std::optional<int32_t> BpeModel::find(std::string_view bytes) const {
  auto it = vocab_.find(bytes);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (char c : word) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({id, idx - 1, -1});
    if (idx > 0) sym[idx - 1].next = idx;
  }
  if (sym.empty()) return;

  struct Cand {
    int32_t rank, pos, left, right, result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> heap;
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, pos, sym[pos].id, sym[sym[pos].next].id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    // Stale entries: the left symbol was absorbed (id -1) or either side changed since.
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;
    int32_t right_idx = left.next;
    left.id = c.result;
    left.next = sym[right_idx].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    sym[right_idx].id = -1;
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  if (word.size() == 1) {
    int32_t id = byte_ids_[static_cast<uint8_t>(word[0])];
    if (id >= 0) out->push_back(id);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out->size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out->begin() + start, out->end()));
  }
}

}  // namespace deepinfer::recipe
