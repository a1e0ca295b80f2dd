// The vocabulary as a byte trie in preorder arrays, built once per tokenizer and shared by
// every grammar over it: the context walker scans it linearly and skips dead subtrees.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/engine/grammar/token_vocabulary.h"

namespace deepinfer::engine::grammar {

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
  std::vector<uint32_t> below;                     // [nodes]
  std::vector<std::array<uint64_t, 4>> below_sets;  // distinct sets; [0] = empty
  // Printable ASCII but '"' and '\\' (the bytes of most tokens inside a quoted string).
  std::array<uint64_t, 4> plain{};
  // The longest path below node k when every byte below it is plain, else kNotPlain: a state
  // that survives that many plain bytes accepts the whole subtree (counted runs, maxLength).
  static constexpr uint8_t kNotPlain = 255;
  std::vector<uint8_t> plain_height;  // [nodes]

  size_t num_nodes() const { return byte.size(); }
};

// The trie of `vocab`, cached for the life of the process (one per tokenizer).
std::shared_ptr<const VocabTrie> shared_vocab_trie(const std::shared_ptr<const TokenVocabulary>& vocab);

}  // namespace deepinfer::engine::grammar
