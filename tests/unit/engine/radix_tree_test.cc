// RadixTree alone: branching, duplicate inserts, LRU eviction with leaves before parents.
#include "deepinfer/engine/radix_tree.h"

#include <gtest/gtest.h>

#include "deepinfer/engine/block_hash.h"

namespace deepinfer::engine {
namespace {

BlockHash key_of(const BlockHash& parent, std::vector<int32_t> tokens) {
  return chain_block_hash(parent, tokens);
}

TEST(BlockHash, ChainsAndNamespaces) {
  BlockHash r1 = root_block_hash("model-a");
  BlockHash r2 = root_block_hash("model-b");
  EXPECT_NE(r1, r2);
  EXPECT_EQ(key_of(r1, {1, 2}), key_of(r1, {1, 2}));
  EXPECT_NE(key_of(r1, {1, 2}), key_of(r2, {1, 2}));
  EXPECT_NE(key_of(r1, {1, 2}), key_of(r1, {2, 1}));
  // Same block tokens after different prefixes are different blocks.
  EXPECT_NE(key_of(key_of(r1, {1, 2}), {3, 4}), key_of(key_of(r1, {9, 9}), {3, 4}));
}

TEST(RadixTree, MatchFollowsLongestChainAndBranches) {
  RadixTree t;
  BlockHash r = root_block_hash("m");
  BlockHash a = key_of(r, {1}), ab = key_of(a, {2}), abc = key_of(ab, {3}), abd = key_of(ab, {4});
  EXPECT_EQ(t.insert(RadixTree::kRootParent, a, 10), 10);
  EXPECT_EQ(t.insert(10, ab, 11), 11);
  EXPECT_EQ(t.insert(11, abc, 12), 12);
  EXPECT_EQ(t.insert(11, abd, 13), 13);  // a second branch below ab
  EXPECT_EQ(t.num_children(11), 2);
  EXPECT_EQ(t.num_children(RadixTree::kRootParent), 1);
  EXPECT_EQ(t.match(std::vector<BlockHash>{a, ab, abd}), (std::vector<int32_t>{10, 11, 13}));
  EXPECT_EQ(t.match(std::vector<BlockHash>{a, ab, abc}), (std::vector<int32_t>{10, 11, 12}));
  // Divergence at the second block: only the first matches.
  BlockHash ax = key_of(a, {7});
  EXPECT_EQ(t.match(std::vector<BlockHash>{a, ax, key_of(ax, {3})}), (std::vector<int32_t>{10}));
  EXPECT_TRUE(t.match(std::vector<BlockHash>{key_of(r, {2})}).empty());
  // Inserting an existing key returns the cached block and adds nothing.
  EXPECT_EQ(t.insert(10, ab, 99), 11);
  EXPECT_EQ(t.num_nodes(), 4);
  EXPECT_FALSE(t.contains(99));
}

TEST(RadixTree, ReferencedNodesAreNeverEvicted) {
  RadixTree t;
  BlockHash r = root_block_hash("m");
  t.insert(RadixTree::kRootParent, key_of(r, {1}), 0);
  EXPECT_EQ(t.num_evictable(), 0);
  EXPECT_FALSE(t.evict_lru().has_value());
  t.set_referenced(0, false);
  EXPECT_EQ(t.num_evictable(), 1);
  t.set_referenced(0, true);
  EXPECT_FALSE(t.evict_lru().has_value());
}

TEST(RadixTree, EvictsLeastRecentlyUsedLeavesFirst) {
  RadixTree t;
  BlockHash r = root_block_hash("m");
  // Chain A: 0 -> 1 -> 2; chain B: 3 -> 4 (separate root branch).
  BlockHash a0 = key_of(r, {1}), a1 = key_of(a0, {2}), a2 = key_of(a1, {3});
  BlockHash b0 = key_of(r, {5}), b1 = key_of(b0, {6});
  t.insert(RadixTree::kRootParent, a0, 0);
  t.insert(0, a1, 1);
  t.insert(1, a2, 2);
  t.insert(RadixTree::kRootParent, b0, 3);
  t.insert(3, b1, 4);
  // Release A (tail first, as KvCacheManager::free does), then B.
  for (int b : {2, 1, 0, 4, 3}) t.set_referenced(b, false);
  EXPECT_EQ(t.num_evictable(), 5);
  // A is older: its leaf goes first, then its parent once it became a leaf, and so on.
  std::vector<int32_t> order;
  while (auto e = t.evict_lru()) order.push_back(e->block);
  EXPECT_EQ(order, (std::vector<int32_t>{2, 1, 0, 4, 3}));
  EXPECT_EQ(t.num_nodes(), 0);
  EXPECT_EQ(t.num_evictable(), 0);
}

TEST(RadixTree, MatchRefreshesRecency) {
  RadixTree t;
  BlockHash r = root_block_hash("m");
  BlockHash a = key_of(r, {1}), b = key_of(r, {2});
  t.insert(RadixTree::kRootParent, a, 0);
  t.insert(RadixTree::kRootParent, b, 1);
  t.set_referenced(0, false);
  t.set_referenced(1, false);
  t.match(std::vector<BlockHash>{a});  // a is now the most recent
  auto e = t.evict_lru();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->block, 1);
  EXPECT_EQ(e->key, b);
}

TEST(RadixTree, ParentWithHeldChildIsNotALeaf) {
  RadixTree t;
  BlockHash r = root_block_hash("m");
  BlockHash a = key_of(r, {1}), ab = key_of(a, {2});
  t.insert(RadixTree::kRootParent, a, 0);
  t.insert(0, ab, 1);
  t.set_referenced(0, false);  // not a state KvCacheManager produces, but the tree must cope
  EXPECT_FALSE(t.evict_lru().has_value());
  t.set_referenced(1, false);
  EXPECT_EQ(t.evict_lru()->block, 1);
  EXPECT_EQ(t.evict_lru()->block, 0);
}

}  // namespace
}  // namespace deepinfer::engine
