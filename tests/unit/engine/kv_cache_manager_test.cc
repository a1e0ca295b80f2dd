// KvCacheManager: refcounts, plan-then-commit allocation, prefix hits at block granularity,
// duplicate blocks, LRU eviction and the lower-tier hook. Every test ends with all blocks back.
// Hybrid caches (recent slabs, bounded replay, checkpoints): kv_cache_manager_hybrid_test.cc.
#include "deepinfer/engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "kv_manager_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::check;
using testing::compute;
using testing::FakeTier;
using testing::iota_tokens;
using testing::kv_config;
using testing::make_seq;

TEST(BlockPool, RefcountsAndFreeList) {
  BlockPool pool(3, 4);
  EXPECT_EQ(pool.num_free(), 3);
  auto a = pool.take_free(), b = pool.take_free(), c = pool.take_free();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0);
  EXPECT_FALSE(pool.take_free().has_value());
  pool.incref(*b);
  EXPECT_EQ(pool.decref(*b), 1);
  EXPECT_EQ(pool.decref(*b), 0);
  pool.put_free(*b);
  EXPECT_TRUE(pool.is_free(*b));
  EXPECT_EQ(*pool.take_free(), *b);
}

TEST(KvCacheManager, ValidateRejectsBadConfig) {
  EXPECT_FALSE(validate(kv_config(0, 16)).is_ok());
  EXPECT_FALSE(validate(kv_config(8, 0)).is_ok());
  EXPECT_TRUE(validate(kv_config(8, 16)).is_ok());
}

TEST(KvCacheManager, AllocateAndFreeKeepRefcounts) {
  KvCacheManager kv(kv_config(8, 4));
  Sequence a = make_seq(1, iota_tokens(10));
  auto got = kv.allocate_slots(a, 10);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 3);
  EXPECT_EQ(a.block_table.size(), 3u);
  EXPECT_EQ(kv.num_available_blocks(), 5);
  check(kv, {&a});
  // Growing within the last block takes nothing; crossing a boundary takes one.
  compute(kv, a, 10);
  EXPECT_EQ(*kv.allocate_slots(a, 2), 0);
  EXPECT_EQ(*kv.allocate_slots(a, 3), 1);
  check(kv, {&a});
  kv.free(a);
  EXPECT_TRUE(a.block_table.empty());
  EXPECT_EQ(a.num_computed_tokens, 0);
  EXPECT_EQ(kv.num_available_blocks(), 8);
  check(kv, {});
}

TEST(KvCacheManager, FailedAllocationChangesNothing) {
  KvCacheManager kv(kv_config(4, 4));
  Sequence a = make_seq(1, iota_tokens(12));
  ASSERT_TRUE(kv.allocate_slots(a, 12).has_value());
  Sequence b = make_seq(2, iota_tokens(8, 100));
  EXPECT_FALSE(kv.allocate_slots(b, 8).has_value());
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(kv.num_available_blocks(), 1);
  check(kv, {&a, &b});
  kv.free(a);
  check(kv, {&b});
}

TEST(KvCacheManager, IdenticalPromptReusesFullBlocks) {
  KvCacheManager kv(kv_config(8, 4));
  Sequence a = make_seq(1, iota_tokens(10));
  ASSERT_TRUE(kv.allocate_slots(a, 10).has_value());
  compute(kv, a, 10);
  EXPECT_EQ(kv.num_cached_blocks(), 2);  // the 2 trailing tokens are not a full block

  Sequence b = make_seq(2, iota_tokens(10));
  PrefixMatch m = kv.get_computed_blocks(b);
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.num_tokens(4), 8);
  auto got = kv.allocate_slots(b, 2, &m);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 1);
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(kv.stats().admissions, 1);
  EXPECT_EQ(kv.stats().admitted_tokens, 10);
  EXPECT_EQ(kv.stats().hit_tokens, 8);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(kv.pool().ref(a.block_table[0]), 2);
  check(kv, {&a, &b});
  kv.free(a);
  kv.free(b);
  check(kv, {});
  EXPECT_EQ(kv.num_available_blocks(), 8);
  EXPECT_EQ(kv.num_cached_blocks(), 2);  // still cached, now evictable
}

TEST(KvCacheManager, NeverServesTheWholePrompt) {
  KvCacheManager kv(kv_config(8, 4));
  Sequence a = make_seq(1, iota_tokens(8));
  ASSERT_TRUE(kv.allocate_slots(a, 8).has_value());
  compute(kv, a, 8);
  EXPECT_EQ(kv.num_cached_blocks(), 2);
  Sequence b = make_seq(2, iota_tokens(8));
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_EQ(m.blocks.size(), 1u);  // the last block holds the token that must produce logits
  kv.free(a);
  check(kv, {});
}

TEST(KvCacheManager, PartialBlockPrefixIsNotReused) {
  KvCacheManager kv(kv_config(8, 4));
  Sequence a = make_seq(1, iota_tokens(6));
  ASSERT_TRUE(kv.allocate_slots(a, 6).has_value());
  compute(kv, a, 6);
  kv.free(a);
  std::vector<int32_t> p = iota_tokens(6);
  p.insert(p.end(), {50, 51, 52, 53});
  Sequence b = make_seq(2, p);
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_EQ(m.num_tokens(4), 4);  // tokens 5..6 were shared but only in a partial block
  // A prompt that differs inside the first block matches nothing.
  std::vector<int32_t> q = iota_tokens(10);
  q[2] = 999;
  Sequence c = make_seq(3, q);
  EXPECT_TRUE(kv.get_computed_blocks(c).blocks.empty());
  check(kv, {});
}

TEST(KvCacheManager, SharedPrefixWithDivergentSuffixBranches) {
  KvCacheManager kv(kv_config(16, 4));
  std::vector<int32_t> pa = iota_tokens(8), pb = iota_tokens(8);
  pa.insert(pa.end(), {100, 101, 102, 103, 104});
  pb.insert(pb.end(), {200, 201, 202, 203, 204});
  Sequence a = make_seq(1, pa), b = make_seq(2, pb);
  ASSERT_TRUE(kv.allocate_slots(a, 13).has_value());
  compute(kv, a, 13);
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_EQ(m.blocks.size(), 2u);
  ASSERT_TRUE(kv.allocate_slots(b, 5, &m).has_value());
  compute(kv, b, 13);
  EXPECT_EQ(kv.num_cached_blocks(), 4);
  EXPECT_EQ(kv.tree().num_children(a.block_table[1]), 2);  // the split point
  EXPECT_NE(a.block_table[2], b.block_table[2]);
  check(kv, {&a, &b});
  kv.free(b);
  kv.free(a);
  check(kv, {});
}

TEST(KvCacheManager, ConcurrentDuplicateSwitchesToCachedBlock) {
  KvCacheManager kv(kv_config(8, 4));
  Sequence a = make_seq(1, iota_tokens(9)), b = make_seq(2, iota_tokens(9));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  ASSERT_TRUE(kv.allocate_slots(b, 9).has_value());  // both missed: nothing cached yet
  EXPECT_EQ(kv.num_available_blocks(), 2);
  compute(kv, a, 9);
  compute(kv, b, 9);
  EXPECT_EQ(kv.num_cached_blocks(), 2);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_EQ(kv.num_available_blocks(), 4);  // b's two private copies went back
  check(kv, {&a, &b});
  kv.free(a);
  kv.free(b);
  check(kv, {});
}

TEST(KvCacheManager, PrefixCachingOff) {
  KvCacheManager kv(kv_config(8, 4, /*prefix=*/false));
  Sequence a = make_seq(1, iota_tokens(9)), b = make_seq(2, iota_tokens(9));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  compute(kv, a, 9);
  EXPECT_EQ(kv.num_cached_blocks(), 0);
  EXPECT_TRUE(kv.get_computed_blocks(b).blocks.empty());
  kv.free(a);
  check(kv, {});
}

TEST(KvCacheManager, EvictsLruCachedBlocksOnlyWhenNeeded) {
  FakeTier tier;
  KvCacheManager kv(kv_config(6, 4), &tier);
  Sequence a = make_seq(1, iota_tokens(9)), b = make_seq(2, iota_tokens(9, 100));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  compute(kv, a, 9);
  std::vector<int32_t> a_blocks = a.block_table;
  kv.free(a);
  ASSERT_TRUE(kv.allocate_slots(b, 9).has_value());
  compute(kv, b, 9);
  kv.free(b);
  EXPECT_TRUE(tier.evicted.empty());  // free blocks were used before cached ones
  EXPECT_EQ(kv.num_cached_blocks(), 4);
  // Needs 5 blocks with 2 truly free: evicts a's chain (older) tail first, then one of b's.
  Sequence c = make_seq(3, iota_tokens(20, 500));
  ASSERT_TRUE(kv.allocate_slots(c, 20).has_value());
  ASSERT_EQ(tier.evicted.size(), 3u);
  EXPECT_EQ(kv.stats().evictions, 3);
  EXPECT_EQ(tier.evicted[0], a_blocks[1]);
  EXPECT_EQ(tier.evicted[1], a_blocks[0]);
  check(kv, {&c});
  kv.free(c);
  check(kv, {});
}

TEST(KvCacheManager, LoadsPrefixFromLowerTier) {
  FakeTier tier;
  KvCacheManager kv(kv_config(4, 4), &tier);
  Sequence a = make_seq(1, iota_tokens(9));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  compute(kv, a, 9);
  kv.free(a);
  Sequence filler = make_seq(2, iota_tokens(16, 300));
  ASSERT_TRUE(kv.allocate_slots(filler, 16).has_value());  // evicts a's two blocks
  EXPECT_EQ(tier.evicted.size(), 2u);
  kv.free(filler);

  Sequence b = make_seq(3, iota_tokens(9));
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_TRUE(m.blocks.empty());
  EXPECT_EQ(m.num_tier_blocks, 2);
  ASSERT_TRUE(kv.allocate_slots(b, 1, &m).has_value());
  EXPECT_EQ(tier.loads, 2);
  EXPECT_EQ(kv.stats().tier_loaded_blocks, 2);
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_TRUE(kv.tree().contains(b.block_table[0]));
  EXPECT_TRUE(kv.tree().contains(b.block_table[1]));
  check(kv, {&b});
  kv.free(b);

  // A failed load stops the prefix there; the blocks stay allocated for computing.
  Sequence filler2 = make_seq(4, iota_tokens(16, 700));
  ASSERT_TRUE(kv.allocate_slots(filler2, 16).has_value());
  kv.free(filler2);
  tier.loads = 0;
  tier.fail_after = 1;
  Sequence c = make_seq(5, iota_tokens(9));
  PrefixMatch mc = kv.get_computed_blocks(c);
  ASSERT_EQ(mc.num_tier_blocks, 2);
  ASSERT_TRUE(kv.allocate_slots(c, 1, &mc).has_value());
  EXPECT_EQ(c.num_computed_tokens, 4);
  EXPECT_EQ(c.block_table.size(), 3u);
  check(kv, {&c});
  kv.free(c);
  check(kv, {});
}

TEST(KvCacheManager, WritesThroughOnlyBlocksItComputed) {
  FakeTier tier;
  KvCacheManager kv(kv_config(8, 4), &tier);
  Sequence a = make_seq(1, iota_tokens(9));
  ASSERT_TRUE(kv.allocate_slots(a, 9).has_value());
  compute(kv, a, 9);
  ASSERT_EQ(tier.written.size(), 2u);  // at caching time, long before any eviction
  EXPECT_EQ(tier.written[0], a.block_hashes[0]);
  EXPECT_EQ(tier.written[1], a.block_hashes[1]);
  EXPECT_EQ(kv.stats().tier_written_blocks, 2);
  // Same prompt computed privately by a concurrent sequence: deduplicated, not written again.
  Sequence b = make_seq(2, iota_tokens(9));
  ASSERT_TRUE(kv.allocate_slots(b, 9).has_value());
  compute(kv, b, 9);
  EXPECT_EQ(tier.written.size(), 2u);
  kv.free(a);
  kv.free(b);
  // Blocks loaded from the tier are not written back; memory and tier hits are counted apart.
  tier.stored = tier.written;
  KvCacheManager fresh(kv_config(8, 4), &tier);
  tier.written.clear();
  Sequence c = make_seq(3, iota_tokens(9));
  PrefixMatch m = fresh.get_computed_blocks(c);
  ASSERT_EQ(m.num_tier_blocks, 2);
  ASSERT_TRUE(fresh.allocate_slots(c, 1, &m).has_value());
  EXPECT_TRUE(tier.written.empty());
  EXPECT_EQ(fresh.stats().tier_hit_tokens, 8);
  EXPECT_EQ(fresh.stats().memory_hit_tokens, 0);
  Sequence d = make_seq(4, iota_tokens(9));
  PrefixMatch md = fresh.get_computed_blocks(d);
  EXPECT_EQ(md.blocks.size(), 2u);
  ASSERT_TRUE(fresh.allocate_slots(d, 1, &md).has_value());
  EXPECT_EQ(fresh.stats().memory_hit_tokens, 8);
  fresh.free(c);
  fresh.free(d);
  check(fresh, {});
}

}  // namespace
}  // namespace deepinfer::engine
