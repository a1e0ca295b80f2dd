// Slab bookkeeping: a free stack, pins per block and an LRU set of evictable slabs.
#include "deepinfer/engine/recent_slabs.h"

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

RecentSlabs::RecentSlabs(int num_blocks, int num_slabs)
    : num_slabs_(num_slabs),
      slab_of_(num_slabs > 0 ? num_blocks : 0, -1),
      pins_(num_slabs > 0 ? num_blocks : 0, 0),
      tick_of_(num_slabs > 0 ? num_blocks : 0, 0) {
  free_.reserve(num_slabs);
  for (int s = num_slabs - 1; s >= 0; --s) free_.push_back(s);
}

bool RecentSlabs::attach(int32_t block) {
  if (slab_of_[block] >= 0) return true;
  if (free_.empty()) {
    if (evictable_.empty()) return false;
    const int32_t victim = evictable_.begin()->second;
    forget_evictable(victim);
    free_.push_back(slab_of_[victim]);
    slab_of_[victim] = -1;
    ++evictions_;
  }
  slab_of_[block] = free_.back();
  free_.pop_back();
  return true;
}

void RecentSlabs::pin(int32_t block) {
  DI_CHECK(slab_of_[block] >= 0, "pin of block {} without a recent slab", block);
  forget_evictable(block);
  ++pins_[block];
}

void RecentSlabs::unpin(int32_t block, bool keep) {
  DI_CHECK(pins_[block] > 0 && slab_of_[block] >= 0, "unpin of block {} (pins {}, slab {})", block,
           pins_[block], slab_of_[block]);
  if (--pins_[block] > 0) return;
  if (keep) {
    make_evictable(block);
  } else {
    free_.push_back(slab_of_[block]);
    slab_of_[block] = -1;
  }
}

void RecentSlabs::detach(int32_t block) {
  if (slab_of_[block] < 0) return;
  DI_CHECK(pins_[block] == 0, "detach of block {} with {} pins", block, pins_[block]);
  forget_evictable(block);
  free_.push_back(slab_of_[block]);
  slab_of_[block] = -1;
}

int RecentSlabs::drop_evictable() {
  int n = 0;
  while (!evictable_.empty()) {
    detach(evictable_.begin()->second);
    ++n;
  }
  return n;
}

void RecentSlabs::move(int32_t from, int32_t to) {
  DI_CHECK(slab_of_[to] < 0 && slab_of_[from] >= 0, "move of a slab from block {} to {}", from, to);
  forget_evictable(from);
  slab_of_[to] = slab_of_[from];
  pins_[to] = pins_[from];
  slab_of_[from] = -1;
  pins_[from] = 0;
  if (pins_[to] == 0) make_evictable(to);
}

void RecentSlabs::make_evictable(int32_t block) {
  forget_evictable(block);
  tick_of_[block] = ++tick_;
  evictable_.insert({tick_of_[block], block});
}

void RecentSlabs::forget_evictable(int32_t block) {
  if (tick_of_[block] == 0) return;
  evictable_.erase({tick_of_[block], block});
  tick_of_[block] = 0;
}

void RecentSlabs::check_invariants(const std::vector<int>& expected_pins) const {
  if (!enabled()) return;
  std::vector<int> owners(num_slabs_, 0);
  for (int32_t s : free_) ++owners[s];
  for (size_t b = 0; b < slab_of_.size(); ++b) {
    DI_CHECK(pins_[b] == expected_pins[b], "block {}: {} recent pins but {} expected", b, pins_[b],
             expected_pins[b]);
    if (slab_of_[b] >= 0) ++owners[slab_of_[b]];
    DI_CHECK(pins_[b] == 0 || slab_of_[b] >= 0, "pinned block {} has no slab", b);
    DI_CHECK(tick_of_[b] == 0 || (pins_[b] == 0 && slab_of_[b] >= 0), "evictable block {}", b);
  }
  for (int s = 0; s < num_slabs_; ++s)
    DI_CHECK(owners[s] == 1, "recent slab {} has {} owners", s, owners[s]);
}

}  // namespace deepinfer::engine
