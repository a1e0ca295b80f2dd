// Byte-level BPE merging: vocabulary of raw byte strings, merges ranked by order, and a
// per-model cache of word -> ids (most words repeat).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::recipe {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeModel {
 public:
  // token_bytes[id] is the raw byte string of each token (empty for holes); `mergeable[id]`
  // says whether the token may be the product of merges / a single-byte start symbol (false
  // for special tokens). merges are pairs of raw byte strings, best (rank 0) first.
  // ignore_merges: a word that is itself in the vocabulary becomes that one token (Llama 3).
  static Result<BpeModel> build(const std::vector<std::string>& token_bytes,
                                const std::vector<bool>& mergeable,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                bool ignore_merges);

  BpeModel() = default;
  BpeModel(BpeModel&& o) noexcept;
  BpeModel& operator=(BpeModel&& o) noexcept;

  // Appends the ids of one pre-tokenized word. Bytes with no token of their own are dropped
  // (what HF BPE does without an unk token).
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;

  std::optional<int32_t> find(std::string_view bytes) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>* out) const;
  struct MergeInfo {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::unordered_map<uint64_t, MergeInfo> merges_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;

  static constexpr size_t kMaxCacheEntries = 1 << 18;
  static constexpr size_t kMaxCachedWordBytes = 256;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>
      cache_;
};

}  // namespace deepinfer::recipe
