// The tokens a run of one byte class takes, by length: for a class C of plain bytes (a
// pattern's [0-9A-Za-z]{8}, [a-z0-9]+, a date's digits), the tokens made of C bytes alone of
// at most L bytes, and the trie nodes at depth L on a path of C bytes that have children
// (where longer tokens go on past L bytes of C). A context walker state that takes exactly C
// among the plain bytes, every byte of C alike, for h bytes in a row, classifies every plain
// token from these without walking the run: the tokens of C alone of at most h bytes live,
// any other plain byte within the first h dies, and only the subtrees at depth h are walked
// (see ContextWalker::scan). Built once per tokenizer and class, and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/structured/grammar_ir.h"
#include "deepinfer/structured/masks/vocab_trie.h"

namespace deepinfer::structured {

struct ClassRunTable {
  ByteSet bytes;  // C (plain bytes only)
  // The longest path of C bytes from the trie's root; 0 when none, or when a bitmask per
  // length would pass 8 MB (no table: no class run for C).
  size_t max_depth = 0;
  // Row L - 1 (L = 1..max_depth): the bitmask (mask_words words) of the tokens of C bytes
  // alone of at most L bytes; num_up_to[L] counts them (num_up_to[0] = 0).
  std::vector<uint32_t> up_to_bits;
  std::vector<uint32_t> num_up_to;
  // The same tokens by length (shortest first): the first num_up_to[L] are those of at most
  // L bytes (a list where few).
  std::vector<int32_t> by_length;
  // [L] (L = 1..max_depth; [0] is empty) the whole trie's nodes at depth L whose path is all
  // C bytes and that have children, in preorder.
  std::vector<std::vector<uint32_t>> frontier;
  size_t mask_words = 0;

  const uint32_t* up_to(size_t len) const { return up_to_bits.data() + (len - 1) * mask_words; }
  size_t memory_bytes() const;
};

// Builds the table for class c (its plain bytes) over `trie`'s tokens (the whole trie).
ClassRunTable build_class_run_table(const VocabTrie& trie, const ByteSet& c);

// The table of `trie` for class c, kept for the process (one per tokenizer and class); null
// once the tables of `trie` pass a memory bound (then no class run is used).
std::shared_ptr<const ClassRunTable> shared_class_run_table(
    const std::shared_ptr<const VocabTrie>& trie, const ByteSet& c);

}  // namespace deepinfer::structured
