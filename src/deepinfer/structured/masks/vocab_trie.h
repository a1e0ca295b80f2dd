// The vocabulary as a byte trie in preorder arrays, built once per tokenizer and shared by
// every grammar over it: the context walker scans it linearly and skips dead subtrees.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/structured/masks/token_vocabulary.h"

namespace deepinfer::structured {

struct VocabTrie {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<bool> eos;  // [vocab]
  size_t max_len = 1;
  // Node k's subtree is [k, end[k]); its children start at k + 1. Node 0 is the root.
  std::vector<uint8_t> byte;        // [nodes] edge byte into the node
  std::vector<uint32_t> depth;      // [nodes] bytes from the root
  std::vector<int32_t> token;       // [nodes] token ending here, or -1
  std::vector<uint32_t> end;        // [nodes]
  std::vector<uint32_t> tok_begin;  // [nodes + 1] index into `tokens` of the first token at >= k
  std::vector<int32_t> tokens;      // non-special, non-empty tokens in preorder (= byte order)
  // The bytes that occur below node k (on edges inside its subtree, not its own edge):
  // below_sets[below[k]]. A scan whose state loops on all of them accepts the whole subtree
  // without visiting it. Distinct sets are stored once.
  std::vector<uint32_t> below;                      // [nodes]
  std::vector<std::array<uint64_t, 4>> below_sets;  // distinct sets; [0] = empty
  // Printable ASCII but '"' and '\\' (the bytes of most tokens inside a quoted string).
  std::array<uint64_t, 4> plain{};
  // The longest path below node k when every byte below it is plain, else kNotPlain: a state
  // that survives that many plain bytes accepts the whole subtree (counted runs, maxLength).
  static constexpr uint8_t kNotPlain = 255;
  std::vector<uint8_t> plain_height;  // [nodes]
  // The longest path below node k (255: that or more): a state that survives that many bytes
  // of the subtree's byte set, one same next state per byte, accepts the subtree whole.
  std::vector<uint8_t> height;  // [nodes]
  // Token bitmasks (mask_words words each) of the subtrees holding many tokens: a scan that
  // accepts such a subtree whole ORs its words instead of setting a bit per token (a string
  // body accepts most of the vocabulary this way). Node k's words start at
  // subtree_bits[subtree_bits_at[k]], or subtree_bits_at[k] = kNoBits.
  static constexpr uint32_t kNoBits = 0xFFFFFFFFu;
  static constexpr size_t kSubtreeBitsWordsPerToken = 4;  // bits kept from mask_words / 4 tokens
  std::vector<uint32_t> subtree_bits_at;                  // [nodes]
  std::vector<uint32_t> subtree_bits;

  // Node k's path from the root is all plain bytes (so with a plain subtree, its tokens are
  // all plain tokens); and the bitmask and count of the plain tokens: a state that survives
  // max_len plain bytes accepts all of them at once (a string body).
  std::vector<uint8_t> plain_path;  // [nodes]
  std::vector<uint32_t> plain_token_bits;
  size_t num_plain_tokens = 0;
  // The plain tokens of at most L bytes, for L = 1..max_short_plain (cumulative bitmasks): a
  // state that survives exactly L plain bytes and then dies on every one (near the end of a
  // bounded string body) accepts these and no longer plain token. L stops short of max_len
  // where the tables would pass kMaxShortPlainBytes (huge vocabularies with long tokens).
  static constexpr size_t kMaxShortPlainBytes = size_t{8} << 20;
  size_t max_short_plain = 0;
  std::vector<uint32_t> short_plain_bits;  // [max_short_plain * mask_words]
  std::vector<uint32_t> num_short_plain;   // [max_short_plain + 1]
  const uint32_t* short_plain(size_t len) const {
    return short_plain_bits.data() + (len - 1) * vocab->mask_words();
  }
  // The trie of the tokens that are not plain (a few percent of a vocabulary), laid out
  // alike: a scan that classifies the plain tokens at once by bitmask walks this one
  // instead, a few thousand nodes that stay in cache, rather than picking the paths to the
  // same tokens out of the whole trie. Null in itself.
  std::shared_ptr<const VocabTrie> non_plain;
  // Text tokens (is_text_token) and the trie of the tokens that are neither plain nor text:
  // a state that takes back to itself every plain byte and every UTF-8 character of two to
  // four bytes (a JSON string body) accepts the text tokens too, and walks only that trie.
  std::vector<uint32_t> text_token_bits;  // [mask_words]; empty in the two smaller tries
  size_t num_text_tokens = 0;
  std::shared_ptr<const VocabTrie> non_text;
  // The depth-1 nodes (first bytes), in byte order, and by byte.
  std::vector<uint32_t> root_children;
  std::array<uint32_t, 256> root_child{};  // 0 = no token starts with that byte
  std::array<uint64_t, 4> root_bytes{};    // the bytes that have one

  size_t num_nodes() const { return byte.size(); }
  size_t subtree_tokens(uint32_t k) const { return tok_begin[end[k]] - tok_begin[k]; }
  // ORs the tokens of node k's whole subtree into `mask`.
  void add_subtree(uint32_t k, uint32_t* mask) const;
};

// Some byte is not ASCII, and the bytes are well-formed UTF-8 with no control character, '"'
// or '\\', the last character possibly cut short (a token may end inside one): a JSON string
// body that allows any character takes every such token.
bool is_text_token(const std::string& bytes);

// The well-formed multi-byte UTF-8 forms (no overlong form, no surrogate, nothing past
// U+10FFFF): a lead byte range, then the range of each next byte.
struct Utf8Form {
  uint8_t lo[4], hi[4];
  int len;
};
inline constexpr Utf8Form kUtf8Forms[] = {
    {{0xC2, 0x80}, {0xDF, 0xBF}, 2},
    {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
    {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
    {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
    {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
    {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
    {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
    {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4},
};

// The trie of `vocab`, cached for the life of the process (one per tokenizer).
std::shared_ptr<const VocabTrie> shared_vocab_trie(
    const std::shared_ptr<const TokenVocabulary>& vocab);

}  // namespace deepinfer::structured
