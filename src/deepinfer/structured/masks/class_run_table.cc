// See class_run_table.h.
#include "deepinfer/structured/masks/class_run_table.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace deepinfer::structured {

size_t ClassRunTable::memory_bytes() const {
  size_t n = sizeof(*this) + up_to_bits.size() * 4 + num_up_to.size() * 4 + by_length.size() * 4;
  for (const auto& f : frontier) n += f.size() * 4;
  return n;
}

ClassRunTable build_class_run_table(const VocabTrie& t, const ByteSet& c) {
  ClassRunTable out;
  for (int w = 0; w < 4; ++w) out.bytes.bits[w] = c.bits[w] & t.plain[w];
  out.mask_words = static_cast<size_t>(t.vocab->mask_words());
  out.frontier.resize(1);
  // Preorder, descending only into nodes of C bytes: every node met has a path of C bytes
  // down to its parent, and the others' subtrees are skipped at their first node.
  std::vector<uint32_t> tokens_of_len(1, 0);
  std::vector<std::pair<uint32_t, uint32_t>> token_nodes;  // (depth, node)
  for (uint32_t k = 1; k < t.num_nodes();) {
    if (!out.bytes.test(t.byte[k])) {
      k = t.end[k];
      continue;
    }
    const uint32_t d = t.depth[k];
    if (out.frontier.size() <= d) {
      out.frontier.resize(d + 1);
      tokens_of_len.resize(d + 1, 0);
    }
    out.max_depth = std::max<size_t>(out.max_depth, d);
    if (t.end[k] > k + 1) out.frontier[d].push_back(k);
    if (t.tok_begin[k + 1] > t.tok_begin[k]) {
      token_nodes.push_back({d, k});
      tokens_of_len[d] += t.tok_begin[k + 1] - t.tok_begin[k];
    }
    ++k;
  }
  // A vocabulary of very long runs (spaces, say) would need a bitmask per length: past
  // kMaxBitsBytes the class gets no table (max_depth 0: no class run, the scan walks).
  constexpr size_t kMaxBitsBytes = size_t{8} << 20;
  if (out.max_depth * out.mask_words * 4 > kMaxBitsBytes) {
    out.max_depth = 0;
    out.frontier.assign(1, {});
    token_nodes.clear();
  }
  out.up_to_bits.assign(out.max_depth * out.mask_words, 0);
  for (const auto& [d, k] : token_nodes) {
    uint32_t* row = out.up_to_bits.data() + (d - 1) * out.mask_words;
    for (uint32_t i = t.tok_begin[k]; i < t.tok_begin[k + 1]; ++i)
      row[t.tokens[i] >> 5] |= 1u << (t.tokens[i] & 31);
  }
  std::stable_sort(token_nodes.begin(), token_nodes.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [d, k] : token_nodes)
    out.by_length.insert(out.by_length.end(), t.tokens.begin() + t.tok_begin[k],
                         t.tokens.begin() + t.tok_begin[k + 1]);
  out.num_up_to.assign(out.max_depth + 1, 0);
  for (size_t len = 1; len <= out.max_depth; ++len) {
    out.num_up_to[len] = out.num_up_to[len - 1] + tokens_of_len[len];
    if (len == 1) continue;
    uint32_t* row = out.up_to_bits.data() + (len - 1) * out.mask_words;
    const uint32_t* shorter = row - out.mask_words;
    for (size_t w = 0; w < out.mask_words; ++w) row[w] |= shorter[w];
  }
  return out;
}

std::shared_ptr<const ClassRunTable> shared_class_run_table(
    const std::shared_ptr<const VocabTrie>& trie, const ByteSet& c) {
  // A few classes per schema, and schemas share them (digits, hex, letters): kept for the
  // process like the trie, up to a bound on their memory per trie.
  constexpr size_t kMaxBytesPerTrie = size_t{32} << 20;
  struct PerTrie {
    std::weak_ptr<const VocabTrie> trie;
    std::map<std::array<uint64_t, 4>, std::shared_ptr<const ClassRunTable>> tables;
    size_t bytes = 0;
  };
  static std::mutex mu;
  static std::map<const VocabTrie*, PerTrie> cache;
  ByteSet key;
  for (int w = 0; w < 4; ++w) key.bits[w] = c.bits[w] & trie->plain[w];
  {
    std::lock_guard<std::mutex> lock(mu);
    PerTrie& per = cache[trie.get()];
    if (per.trie.lock() != trie) per = PerTrie{trie, {}, 0};  // a new trie at a freed address
    auto it = per.tables.find(key.bits);
    if (it != per.tables.end()) return it->second;
    if (per.bytes >= kMaxBytesPerTrie) return nullptr;
  }
  // Built outside the lock; a table built meanwhile by another thread is kept instead.
  auto table = std::make_shared<const ClassRunTable>(build_class_run_table(*trie, key));
  std::lock_guard<std::mutex> lock(mu);
  PerTrie& per = cache[trie.get()];
  if (per.trie.lock() != trie) per = PerTrie{trie, {}, 0};
  auto [it, inserted] = per.tables.try_emplace(key.bits, table);
  if (inserted) per.bytes += table->memory_bytes();
  return it->second;
}

}  // namespace deepinfer::structured
