// Refcounted block ids; misuse (double free, decref below zero) is a broken invariant.
#include "deepinfer/engine/block_pool.h"

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

BlockPool::BlockPool(int num_blocks, int block_size)
    : block_size_(block_size), ref_(num_blocks, 0), in_free_(num_blocks, 1) {
  DI_CHECK(num_blocks > 0 && block_size > 0, "num_blocks={} block_size={}", num_blocks, block_size);
  free_.reserve(num_blocks);
  // Reversed so that block 0 is handed out first, which keeps tests readable.
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::take_free() {
  if (free_.empty()) return std::nullopt;
  int32_t b = free_.back();
  free_.pop_back();
  in_free_[b] = 0;
  DI_CHECK(ref_[b] == 0, "free block {} has refcount {}", b, ref_[b]);
  ref_[b] = 1;
  return b;
}

void BlockPool::put_free(int32_t block) {
  DI_CHECK(block >= 0 && block < num_blocks(), "block id {} out of range", block);
  DI_CHECK(ref_[block] == 0 && !in_free_[block], "block {} freed while ref={} free={}", block,
           ref_[block], static_cast<int>(in_free_[block]));
  in_free_[block] = 1;
  free_.push_back(block);
}

void BlockPool::incref(int32_t block) {
  DI_CHECK(block >= 0 && block < num_blocks() && !in_free_[block], "incref of block {}", block);
  ++ref_[block];
}

int BlockPool::decref(int32_t block) {
  DI_CHECK(block >= 0 && block < num_blocks() && ref_[block] > 0, "decref of block {}", block);
  return --ref_[block];
}

int BlockPool::ref(int32_t block) const { return ref_[block]; }
bool BlockPool::is_free(int32_t block) const { return in_free_[block] != 0; }

}  // namespace deepinfer::engine
