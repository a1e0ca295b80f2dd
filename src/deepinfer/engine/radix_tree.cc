// Radix tree bookkeeping: the evictable-leaf set must follow every change of a node's
// referenced flag, children count or access time.
#include "deepinfer/engine/radix_tree.h"

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

RadixTree::RadixTree() {
  nodes_.emplace_back();  // root: never evicted, holds no block
  in_leaf_set_.push_back(0);
}

int32_t RadixTree::new_node() {
  if (!free_nodes_.empty()) {
    int32_t n = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[n] = Node{};
    return n;
  }
  nodes_.emplace_back();
  in_leaf_set_.push_back(0);
  return static_cast<int32_t>(nodes_.size() - 1);
}

void RadixTree::update_leaf_set(int32_t n) {
  if (n == 0) return;
  const Node& node = nodes_[n];
  bool want = !node.referenced && node.children.empty();
  if (in_leaf_set_[n]) {
    evictable_leaves_.erase({node.last_access, n});
    in_leaf_set_[n] = 0;
  }
  if (want) {
    evictable_leaves_.insert({node.last_access, n});
    in_leaf_set_[n] = 1;
  }
}

void RadixTree::touch(int32_t n) {
  if (n == 0) return;
  if (in_leaf_set_[n]) evictable_leaves_.erase({nodes_[n].last_access, n});
  nodes_[n].last_access = ++clock_;
  if (in_leaf_set_[n]) evictable_leaves_.insert({nodes_[n].last_access, n});
}

std::vector<int32_t> RadixTree::match(std::span<const BlockHash> keys) {
  std::vector<int32_t> blocks;
  int32_t cur = 0;
  for (const BlockHash& k : keys) {
    auto it = nodes_[cur].children.find(k);
    if (it == nodes_[cur].children.end()) break;
    cur = it->second;
    touch(cur);
    blocks.push_back(nodes_[cur].block);
  }
  return blocks;
}

int32_t RadixTree::insert(int32_t parent_block, const BlockHash& key, int32_t block) {
  int32_t parent = 0;
  if (parent_block != kRootParent) {
    auto it = node_of_block_.find(parent_block);
    DI_CHECK(it != node_of_block_.end(), "insert under uncached block {}", parent_block);
    parent = it->second;
  }
  auto existing = nodes_[parent].children.find(key);
  if (existing != nodes_[parent].children.end()) {
    touch(existing->second);
    return nodes_[existing->second].block;
  }
  DI_CHECK(!contains(block), "block {} is already cached under another key", block);
  int32_t n = new_node();
  Node& node = nodes_[n];
  node.key = key;
  node.block = block;
  node.parent = parent;
  node.referenced = true;
  node.last_access = ++clock_;
  nodes_[parent].children.emplace(key, n);
  node_of_block_.emplace(block, n);
  update_leaf_set(parent);
  return block;
}

bool RadixTree::is_referenced(int32_t block) const {
  auto it = node_of_block_.find(block);
  return it != node_of_block_.end() && nodes_[it->second].referenced;
}

int RadixTree::num_children(int32_t parent_block) const {
  if (parent_block == kRootParent) return static_cast<int>(nodes_[0].children.size());
  auto it = node_of_block_.find(parent_block);
  return it == node_of_block_.end() ? 0 : static_cast<int>(nodes_[it->second].children.size());
}

void RadixTree::set_referenced(int32_t block, bool referenced) {
  auto it = node_of_block_.find(block);
  DI_CHECK(it != node_of_block_.end(), "block {} is not cached", block);
  int32_t n = it->second;
  if (nodes_[n].referenced == referenced) return;
  nodes_[n].referenced = referenced;
  num_unreferenced_ += referenced ? -1 : 1;
  // Releasing counts as a use: the prefix a sequence just finished with is the likeliest reuse.
  if (!referenced) nodes_[n].last_access = ++clock_;
  update_leaf_set(n);
}

std::optional<RadixTree::Evicted> RadixTree::evict_lru() {
  if (evictable_leaves_.empty()) return std::nullopt;
  auto [stamp, n] = *evictable_leaves_.begin();
  evictable_leaves_.erase(evictable_leaves_.begin());
  in_leaf_set_[n] = 0;
  Node& node = nodes_[n];
  Evicted out{node.key, node.block};
  int32_t parent = node.parent;
  nodes_[parent].children.erase(node.key);
  node_of_block_.erase(node.block);
  --num_unreferenced_;
  node.children.clear();
  free_nodes_.push_back(n);
  update_leaf_set(parent);
  return out;
}

}  // namespace deepinfer::engine
