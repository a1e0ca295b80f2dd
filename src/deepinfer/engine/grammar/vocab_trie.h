// The vocabulary as a byte trie in preorder arrays, built once per tokenizer and shared by
// every grammar over it: the context walker scans it linearly and skips dead subtrees.
#pragma once

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

  size_t num_nodes() const { return byte.size(); }
};

// The trie of `vocab`, cached for the life of the process (one per tokenizer).
std::shared_ptr<const VocabTrie> shared_vocab_trie(const std::shared_ptr<const TokenVocabulary>& vocab);

}  // namespace deepinfer::engine::grammar
