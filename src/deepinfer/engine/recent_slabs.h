// Recent slabs of a hybrid KV cache (model/kv_cache.h): which slab holds a block's recent rows
// (the sliding window's K/V, the compressors' unfinished-window inputs). A slab is
//   free        on the free list;
//   pinned      by the live sequences whose end is within recent_tokens of the block (they read
//               it in their next step); never taken away;
//   evictable   unpinned but kept because its block is in the prefix cache: a later hit whose
//               end falls within recent_tokens of the block needs it; least recently unpinned
//               first when a slab is needed;
//   held        attached to a block that no sequence pins yet (within one allocation).
// Blocks without a slab keep their paged state; only their recent rows are gone.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace deepinfer::engine {

class RecentSlabs {
 public:
  RecentSlabs(int num_blocks, int num_slabs);

  bool enabled() const { return num_slabs_ > 0; }
  int num_slabs() const { return num_slabs_; }
  // Slabs an attach could get now: free plus evictable.
  int num_available() const { return static_cast<int>(free_.size() + evictable_.size()); }
  int32_t slab_of(int32_t block) const { return slab_of_[block]; }
  const std::vector<int32_t>& slab_of_block() const { return slab_of_; }
  bool is_evictable(int32_t block) const { return tick_of_[block] != 0; }
  int pins(int32_t block) const { return pins_[block]; }
  int64_t evictions() const { return evictions_; }

  // Gives `block` a slab when it has none: a free one, else the least recently unpinned
  // evictable one (its block loses its rows). Returns false, changing nothing, when none is left.
  [[nodiscard]] bool attach(int32_t block);
  // The block must have a slab; pinned slabs are never evicted.
  void pin(int32_t block);
  // Drops one pin. At zero pins the slab stays as evictable when `keep` (the block is in the
  // prefix cache), else it goes back to the free list.
  void unpin(int32_t block, bool keep);
  // The block is reused or freed: its slab (unpinned) goes back to the free list.
  void detach(int32_t block);
  // Frees every evictable slab (their blocks keep their paged state); returns how many.
  int drop_evictable();
  // `to` (no slab) takes over `from`'s slab and pins (both hold the same rows).
  void move(int32_t from, int32_t to);

  // Test/debug: `expected_pins[b]` live pins per block; every slab is exactly one of free or
  // attached to one block; evictable slabs are unpinned. Aborts when broken.
  void check_invariants(const std::vector<int>& expected_pins) const;

 private:
  void make_evictable(int32_t block);
  void forget_evictable(int32_t block);

  int num_slabs_;
  std::vector<int32_t> slab_of_;   // [num_blocks] -1 = none
  std::vector<int> pins_;          // [num_blocks]
  std::vector<uint64_t> tick_of_;  // [num_blocks] 0 = not evictable, else its LRU tick
  std::vector<int32_t> free_;      // stack
  std::set<std::pair<uint64_t, int32_t>> evictable_;  // (tick, block), oldest first
  uint64_t tick_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace deepinfer::engine
