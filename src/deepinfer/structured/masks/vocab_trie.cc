// Builds the preorder token trie (see vocab_trie.h) from the byte-sorted token list.
#include "deepinfer/structured/masks/vocab_trie.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace deepinfer::structured {
namespace {

// Printable ASCII but '"' and '\\'.
std::array<uint64_t, 4> plain_bytes() {
  std::array<uint64_t, 4> plain{};
  for (int b = 0x20; b < 0x7F; ++b)
    if (b != '"' && b != '\\') plain[b >> 6] |= uint64_t{1} << (b & 63);
  return plain;
}

}  // namespace

bool is_text_token(const std::string& s) {
  bool multibyte = false;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') return false;
      ++i;
      continue;
    }
    // The lead byte gives the length and the range of the second byte (no overlong forms,
    // no surrogates, nothing past U+10FFFF); later bytes are 80-BF.
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    multibyte = true;
    for (size_t j = 1; j < len; ++j) {
      if (i + j == s.size()) return true;  // the token ends inside the character
      const uint8_t b = static_cast<uint8_t>(s[i + j]);
      if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) return false;
    }
    i += len;
  }
  return multibyte;
}

namespace {

enum class TrieTokens { kAll, kNonPlain, kNonText };

// Stages of build(), over the trie being built.
using ByteSets = std::vector<std::array<uint64_t, 4>>;

// The nodes in preorder from the byte-sorted token ids, and each node's tokens.
void build_nodes(VocabTrie* t, const TokenVocabulary& v, const std::vector<int32_t>& sorted) {
  // Duplicate byte strings (possible in odd vocabularies) share one node; the extras are kept
  // in `tokens` so a subtree's token range still lists them.
  auto push_node = [&](uint8_t b, size_t d) {
    t->byte.push_back(b);
    t->depth.push_back(static_cast<uint32_t>(d));
    t->token.push_back(-1);
    t->end.push_back(0);
  };
  push_node(0, 0);
  std::vector<uint32_t> open = {0};  // open[d] = node at depth d on the current path
  std::vector<std::vector<int32_t>> extra;  // [nodes] duplicate tokens at a node
  const std::string* prev = nullptr;
  for (int32_t id : sorted) {
    const std::string& s = v.token_bytes[id];
    t->max_len = std::max(t->max_len, s.size());
    size_t keep = 0;
    if (prev)
      while (keep < prev->size() && keep < s.size() && (*prev)[keep] == s[keep]) ++keep;
    keep = std::min(keep, open.size() - 1);
    while (open.size() > keep + 1) {
      t->end[open.back()] = static_cast<uint32_t>(t->byte.size());
      open.pop_back();
    }
    for (size_t d = keep; d < s.size(); ++d) {
      open.push_back(static_cast<uint32_t>(t->byte.size()));
      push_node(static_cast<uint8_t>(s[d]), d + 1);
    }
    uint32_t n = open.back();
    if (t->token[n] < 0) {
      t->token[n] = id;
    } else {
      if (extra.size() <= n) extra.resize(n + 1);
      extra[n].push_back(id);
    }
    prev = &s;
  }
  while (!open.empty()) {
    t->end[open.back()] = static_cast<uint32_t>(t->byte.size());
    open.pop_back();
  }
  t->tok_begin.resize(t->byte.size() + 1);
  for (size_t k = 0; k < t->byte.size(); ++k) {
    t->tok_begin[k] = static_cast<uint32_t>(t->tokens.size());
    if (t->token[k] >= 0) t->tokens.push_back(t->token[k]);
    if (k < extra.size())
      for (int32_t id : extra[k]) t->tokens.push_back(id);
  }
  t->tok_begin[t->byte.size()] = static_cast<uint32_t>(t->tokens.size());
}

// Each node's parent, the bytes below it (acc) and its heights.
void build_heights(VocabTrie* t, std::vector<uint32_t>& parent, ByteSets& acc) {
  // Bytes below each node, accumulated child -> parent in reverse preorder (a node's parent
  // is the nearest earlier node one level up, tracked per depth).
  const size_t n = t->byte.size();
  acc.assign(n, std::array<uint64_t, 4>{});
  parent.assign(n, 0);
  std::vector<uint32_t> last_at(t->max_len + 2, 0);
  for (size_t k = 1; k < n; ++k) {
    parent[k] = last_at[t->depth[k] - 1];
    last_at[t->depth[k]] = static_cast<uint32_t>(k);
  }
  t->plain_height.assign(n, 0);
  t->height.assign(n, 0);
  for (size_t k = n; k-- > 1;) {
    uint8_t& h = t->height[parent[k]];
    h = std::max<uint8_t>(h, t->height[k] == 255 ? 255 : static_cast<uint8_t>(t->height[k] + 1));
    uint8_t& ph = t->plain_height[parent[k]];
    const bool plain_edge = (t->plain[t->byte[k] >> 6] >> (t->byte[k] & 63)) & 1;
    const uint8_t mine = t->plain_height[k];
    ph = !plain_edge || mine >= VocabTrie::kNotPlain - 1 ? VocabTrie::kNotPlain
                                                           : std::max<uint8_t>(ph, static_cast<uint8_t>(mine + 1));
    auto& up = acc[parent[k]];
    for (int w = 0; w < 4; ++w) up[w] |= acc[k][w];
    up[t->byte[k] >> 6] |= uint64_t{1} << (t->byte[k] & 63);
  }
}

// Token bitmasks of the subtrees with many tokens.
void build_subtree_bits(VocabTrie* t, size_t words) {
  const size_t n = t->byte.size();
  // A bitmask costs mask_words words to store and to OR (several words per instruction);
  // setting bits one by one costs a few instructions per token.
  const size_t min_tokens = std::max<size_t>(64, words / VocabTrie::kSubtreeBitsWordsPerToken);
  t->subtree_bits_at.assign(n, VocabTrie::kNoBits);
  for (size_t k = 1; k < n; ++k) {  // the root is never accepted whole
    const uint32_t node = static_cast<uint32_t>(k);
    if (t->subtree_tokens(node) < min_tokens) continue;
    t->subtree_bits_at[k] = static_cast<uint32_t>(t->subtree_bits.size());
    t->subtree_bits.resize(t->subtree_bits.size() + words, 0);
    uint32_t* bits = t->subtree_bits.data() + t->subtree_bits_at[k];
    for (uint32_t i = t->tok_begin[k]; i < t->tok_begin[t->end[k]]; ++i)
      bits[t->tokens[i] >> 5] |= 1u << (t->tokens[i] & 31);
  }
}

// The plain tokens (all and by length) and, for the trie of every token, the text tokens.
void build_plain_bits(VocabTrie* t, const TokenVocabulary& v, TrieTokens which,
                      const std::vector<uint32_t>& parent, size_t words) {
  const bool non_plain_only = which != TrieTokens::kAll;
  const size_t n = t->byte.size();
  // The plain tokens, all of them and by length (cumulated below: the bits for length L
  // include every shorter one).
  t->max_short_plain =
      non_plain_only ? 0
                     : std::min(t->max_len - 1, VocabTrie::kMaxShortPlainBytes /
                                                    std::max<size_t>(1, words * sizeof(uint32_t)));
  t->short_plain_bits.assign(t->max_short_plain * words, 0);
  t->num_short_plain.assign(t->max_short_plain + 1, 0);
  t->plain_path.assign(n, 0);
  t->plain_path[0] = 1;
  t->plain_token_bits.assign(words, 0);
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = t->byte[k];
    t->plain_path[k] = t->plain_path[parent[k]] && ((t->plain[b >> 6] >> (b & 63)) & 1);
    if (!t->plain_path[k]) continue;
    const size_t len = t->depth[k];
    uint32_t* by_len =
        len <= t->max_short_plain ? t->short_plain_bits.data() + (len - 1) * words : nullptr;
    for (uint32_t i = t->tok_begin[k]; i < t->tok_begin[k + 1]; ++i, ++t->num_plain_tokens) {
      const int32_t id = t->tokens[i];
      t->plain_token_bits[id >> 5] |= 1u << (id & 31);
      if (by_len) {
        by_len[id >> 5] |= 1u << (id & 31);
        ++t->num_short_plain[len];
      }
    }
  }
  if (which == TrieTokens::kAll) {
    t->text_token_bits.assign(words, 0);
    for (int32_t id : t->tokens)
      if (is_text_token(v.token_bytes[id])) {
        t->text_token_bits[id >> 5] |= 1u << (id & 31);
        ++t->num_text_tokens;
      }
  }
  for (size_t len = 2; len <= t->max_short_plain; ++len) {
    t->num_short_plain[len] += t->num_short_plain[len - 1];
    for (size_t w = 0; w < words; ++w)
      t->short_plain_bits[(len - 1) * words + w] |= t->short_plain_bits[(len - 2) * words + w];
  }
}

// The root's children and the interned byte sets below each node.
void build_root_and_below(VocabTrie* t, const ByteSets& acc) {
  const size_t n = t->byte.size();
  for (uint32_t k = 1; k < n; k = t->end[k]) {
    t->root_children.push_back(k);
    t->root_child[t->byte[k]] = k;
    t->root_bytes[t->byte[k] >> 6] |= uint64_t{1} << (t->byte[k] & 63);
  }
  std::map<std::array<uint64_t, 4>, uint32_t> ids;
  t->below.resize(n);
  t->below_sets.push_back({});
  ids[{}] = 0;
  for (size_t k = 0; k < n; ++k) {
    auto [it, inserted] = ids.try_emplace(acc[k], static_cast<uint32_t>(t->below_sets.size()));
    if (inserted) t->below_sets.push_back(acc[k]);
    t->below[k] = it->second;
  }
}

// The trie of every token, of the tokens with some byte outside the plain set, or of those
// that are neither plain nor text (see is_text_token).
std::shared_ptr<VocabTrie> build(const std::shared_ptr<const TokenVocabulary>& vocab,
                                 TrieTokens which) {
  const bool non_plain_only = which != TrieTokens::kAll;
  auto t = std::make_shared<VocabTrie>();
  const TokenVocabulary& v = *vocab;
  t->vocab = vocab;
  t->plain = plain_bytes();
  t->eos.assign(v.size(), false);
  for (int32_t id : v.eos_ids)
    if (id >= 0 && id < v.size()) t->eos[id] = true;
  auto is_plain = [&](const std::string& s) {
    for (unsigned char c : s)
      if (!((t->plain[c >> 6] >> (c & 63)) & 1)) return false;
    return true;
  };
  std::vector<int32_t> sorted;
  for (int32_t id = 0; id < v.size(); ++id) {
    bool special = !v.is_special.empty() && v.is_special[id];
    if (special || v.token_bytes[id].empty()) continue;
    if (non_plain_only && is_plain(v.token_bytes[id])) continue;
    if (which == TrieTokens::kNonText && is_text_token(v.token_bytes[id])) continue;
    sorted.push_back(id);
  }
  std::sort(sorted.begin(), sorted.end(),
            [&](int32_t a, int32_t b) { return v.token_bytes[a] < v.token_bytes[b]; });
  build_nodes(t.get(), v, sorted);
  std::vector<uint32_t> parent;
  ByteSets acc;
  build_heights(t.get(), parent, acc);
  // A bitmask costs mask_words words to store and to OR (several words per instruction);
  // setting bits one by one costs a few instructions per token.
  const size_t words = v.mask_words();
  build_subtree_bits(t.get(), words);
  build_plain_bits(t.get(), v, which, parent, words);
  build_root_and_below(t.get(), acc);
  return t;
}

}  // namespace

void VocabTrie::add_subtree(uint32_t k, uint32_t* mask) const {
  if (subtree_bits_at[k] != kNoBits) {
    const uint32_t* bits = subtree_bits.data() + subtree_bits_at[k];
    const size_t words = vocab->mask_words();
    for (size_t w = 0; w < words; ++w) mask[w] |= bits[w];
    return;
  }
  // Local pointers: `mask` could alias the vectors' own storage as far as the compiler knows.
  const int32_t* id = tokens.data() + tok_begin[k];
  const int32_t* last = tokens.data() + tok_begin[end[k]];
  for (; id < last; ++id) mask[*id >> 5] |= 1u << (*id & 31);
}

std::shared_ptr<const VocabTrie> shared_vocab_trie(const std::shared_ptr<const TokenVocabulary>& vocab) {
  // Sorting 100k+ tokens costs milliseconds, so one trie serves every grammar of a vocabulary.
  static std::mutex mu;
  static std::map<const TokenVocabulary*, std::shared_ptr<const VocabTrie>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(vocab.get());
  if (it != cache.end() && it->second->vocab == vocab) return it->second;
  auto t = build(vocab, TrieTokens::kAll);
  t->non_plain = build(vocab, TrieTokens::kNonPlain);
  t->non_text = build(vocab, TrieTokens::kNonText);
  cache[vocab.get()] = t;  // kept for the process: one per tokenizer
  return t;
}

}  // namespace deepinfer::structured
