// Physical KV blocks: refcounts and the list of blocks that hold nothing worth keeping.
// Blocks with refcount 0 that hold a cached prefix live in the radix tree, not here.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace deepinfer::engine {

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size);

  int num_blocks() const { return static_cast<int>(ref_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return static_cast<int>(free_.size()); }

  // Takes a block off the free list with refcount 1; nullopt when the list is empty.
  [[nodiscard]] std::optional<int32_t> take_free();
  // Returns an unreferenced block that holds nothing cached.
  void put_free(int32_t block);

  void incref(int32_t block);
  // Returns the new refcount.
  int decref(int32_t block);
  int ref(int32_t block) const;
  bool is_free(int32_t block) const;

 private:
  int block_size_;
  std::vector<int> ref_;        // [num_blocks]
  std::vector<char> in_free_;   // [num_blocks] 1 when on free_
  std::vector<int32_t> free_;   // stack; back() is handed out next
};

}  // namespace deepinfer::engine
