// The model vocabulary as the grammar matcher sees it: raw bytes per token id, special flags
// and end-of-sequence ids. Engine code fills it from recipe::Tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::structured {

struct TokenVocabulary {
  std::vector<std::string> token_bytes;  // [vocab] raw bytes; empty for special tokens
  std::vector<int32_t> eos_ids;          // tokens that end generation (allowed when complete)
  std::vector<bool> is_special;          // [vocab] never produced by a grammar, except EOS

  int32_t size() const { return static_cast<int32_t>(token_bytes.size()); }
  int32_t mask_words() const { return (size() + 31) / 32; }
};

}  // namespace deepinfer::structured
