// Radix tree over block keys: one node per cached full block, children by key, so the
// longest cached prefix of a prompt is a walk from the root. Unreferenced nodes are evicted
// least recently used first, leaves before their parents. It stores only ids (no KV memory),
// so tests build it without a pool.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "deepinfer/engine/block_hash.h"

namespace deepinfer::engine {

class RadixTree {
 public:
  static constexpr int32_t kRootParent = -1;  // parent_block value meaning "the root"

  RadixTree();

  // Block ids of the longest chain of cached keys starting at the root; marks them used now.
  std::vector<int32_t> match(std::span<const BlockHash> keys);

  // Adds `block` under the node of `parent_block` (kRootParent for the first block). Returns
  // `block` when added, or the block already cached under that key (the caller then keeps the
  // existing one). A new node starts referenced.
  int32_t insert(int32_t parent_block, const BlockHash& key, int32_t block);

  // Referenced nodes (some sequence holds the block) are never evicted.
  void set_referenced(int32_t block, bool referenced);

  struct Evicted {
    BlockHash key;
    int32_t block;
  };
  // Removes the least recently used unreferenced leaf; nullopt when none.
  std::optional<Evicted> evict_lru();

  bool contains(int32_t block) const { return node_of_block_.count(block) != 0; }
  bool is_referenced(int32_t block) const;
  int num_nodes() const { return static_cast<int>(node_of_block_.size()); }
  // Unreferenced nodes. All of them can be evicted (leaves first): a sequence holding a block
  // also holds every ancestor, so an unreferenced node has only unreferenced descendants.
  int num_evictable() const { return num_unreferenced_; }
  // Children of `parent_block`'s node (kRootParent: the root), for tests and debugging.
  int num_children(int32_t parent_block) const;

 private:
  struct Node {
    BlockHash key;
    int32_t block = -1;
    int32_t parent = -1;  // node index
    std::unordered_map<BlockHash, int32_t, BlockHashHasher> children;
    uint64_t last_access = 0;
    bool referenced = true;
  };

  int32_t new_node();
  void update_leaf_set(int32_t node);
  void touch(int32_t node);

  std::vector<Node> nodes_;        // index 0 is the root
  std::vector<int32_t> free_nodes_;
  std::unordered_map<int32_t, int32_t> node_of_block_;
  std::set<std::pair<uint64_t, int32_t>> evictable_leaves_;  // (last_access, node)
  std::vector<char> in_leaf_set_;  // [nodes_.size()]
  int num_unreferenced_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace deepinfer::engine
