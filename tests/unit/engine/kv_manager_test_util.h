// Helpers for the KvCacheManager tests: pretend computation, the invariant check, and a fake
// lower tier that serves what it saw evicted and records checkpoints.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "deepinfer/engine/kv_cache_manager.h"

namespace deepinfer::engine::testing {

// Pretends the model ran every allocated token of `seq` up to `tokens`.
inline void compute(KvCacheManager& kv, Sequence& seq, int tokens) {
  seq.num_computed_tokens = tokens;
  kv.cache_full_blocks(seq);
}

inline void check(const KvCacheManager& kv, std::vector<const Sequence*> live) { kv.check_invariants(live); }

// Records evictions; serves what it saw evicted; can be told to fail a load.
class FakeTier : public KvTierHook {
 public:
  void on_block_evicted(const BlockHash& key, int32_t block) override {
    evicted.push_back(block);
    stored.push_back(key);
  }
  int lookup_prefix(Sequence& seq, int first, int count) override {
    int n = 0;
    while (n < count && std::find(stored.begin(), stored.end(), seq.block_hashes[first + n]) !=
                            stored.end())
      ++n;
    return n;
  }
  int load_blocks(Sequence& seq, int first, std::span<const int32_t> blocks) override {
    int n = 0;
    for (; n < static_cast<int>(blocks.size()); ++n) {
      if (fail_after >= 0 && loads >= fail_after) break;
      ++loads;
    }
    return n;
  }
  void on_blocks_cached(Sequence& seq, std::span<const int> indices,
                        std::span<const int32_t> blocks) override {
    for (int i : indices) written.push_back(seq.block_hashes[i]);
  }
  // Checkpoints, by the hash of the prefix's last block.
  void save_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) override {
    checkpoints.push_back(seq.block_hashes[end_blocks - 1]);
    checkpoint_sizes.push_back(static_cast<int>(blocks.size()));
  }
  int checkpointed_prefix(Sequence& seq, int first, int count, int min_count) override {
    for (int m = count; m >= std::max(1, min_count); --m) {
      ++checkpoint_queries;
      if (std::find(checkpoints.begin(), checkpoints.end(), seq.block_hashes[first + m - 1]) !=
          checkpoints.end())
        return m;
    }
    return 0;
  }
  bool load_checkpoint(Sequence& seq, int end_blocks, std::span<const int32_t> blocks) override {
    checkpoint_loads.emplace_back(end_blocks, std::vector<int32_t>(blocks.begin(), blocks.end()));
    return true;
  }
  std::vector<BlockHash> checkpoints;
  std::vector<int> checkpoint_sizes;
  std::vector<std::pair<int, std::vector<int32_t>>> checkpoint_loads;
  std::vector<int32_t> evicted;
  std::vector<BlockHash> stored;
  std::vector<BlockHash> written;  // keys handed over for write-through
  int loads = 0;
  int fail_after = -1;
  int checkpoint_queries = 0;  // prefix ends checkpointed_prefix looked at (a store query each)
};

}  // namespace deepinfer::engine::testing
