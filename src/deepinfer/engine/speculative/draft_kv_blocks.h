// The block lists of a drafter's own paged KV (a draft model's, an MTP head's): per sequence
// the blocks it holds and when it last drafted, so a full pool evicts the least recently
// drafted sequence that is not drafting in the current call.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "deepinfer/engine/block_pool.h"

namespace deepinfer::engine::speculative {

class DraftKvBlocks {
 public:
  DraftKvBlocks(int num_blocks, int block_size)
      : pool_(num_blocks, block_size), block_size_(block_size) {}

  // A new drafting call starts: sequences touched from now on are not evicted during it.
  void begin_call() { ++call_; }
  void touch(int64_t seq_id) { seqs_[seq_id].last_used = call_; }
  // Blocks for positions [0, tokens) of seq_id. Short of free blocks it evicts other sequences
  // not touched in this call, least recently drafted first, telling `evict` (the drafter drops
  // its state of them; it must call release()). False when none is left to evict.
  [[nodiscard]] bool reserve(int64_t seq_id, int tokens, const std::function<void(int64_t)>& evict);
  void release(int64_t seq_id);
  // seq_id's blocks covering positions [0, tokens).
  std::vector<int32_t> table(int64_t seq_id, int tokens) const;
  int block_size() const { return block_size_; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    uint64_t last_used = 0;
  };
  BlockPool pool_;
  int block_size_;
  std::unordered_map<int64_t, Seq> seqs_;
  uint64_t call_ = 0;
};

}  // namespace deepinfer::engine::speculative
