// KvCacheManager with a hybrid cache (model/kv_cache.h: paged state plus recent rows in
// slabs): which blocks keep pinned rows, prefix hits that need the rows before their end,
// bounded replay into private copies, and the lower tier's sliding-window checkpoints (exact
// restore where one is, replay or recompute where none is). Every test ends with all blocks back.
#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/engine/kv_cache_manager.h"
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

// Hybrid caches (recent slabs): 16 blocks of 4 tokens, `slabs` slabs, new tokens read the
// recent rows of the 4 tokens before them.
KvCacheConfig hybrid_config(int slabs, int num_blocks = 16) {
  KvCacheConfig c = kv_config(num_blocks, 4);
  c.num_recent_slabs = slabs;
  c.recent_tokens = 4;
  return c;
}

int pinned_slabs(const KvCacheManager& kv, const Sequence& s) {
  int n = 0;
  for (int32_t b : s.block_table) n += kv.recent_slabs().pins(b) > 0 ? 1 : 0;
  return n;
}

TEST(KvCacheManagerHybrid, OnlyBlocksNearTheEndKeepPinnedSlabs) {
  KvCacheManager kv(hybrid_config(6));
  Sequence a = make_seq(1, iota_tokens(24));
  ASSERT_TRUE(kv.allocate_slots(a, 24).has_value());  // every block of the chunk gets a slab
  EXPECT_EQ(pinned_slabs(kv, a), 6);
  check(kv, {&a});
  compute(kv, a, 24);
  // The next step starts at 24 and reads 20..23: only the last block stays pinned; the others
  // are cached, so their rows stay as evictable.
  EXPECT_EQ(a.recent_from_block, 5);
  EXPECT_EQ(pinned_slabs(kv, a), 1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(kv.recent_slabs().is_evictable(a.block_table[i])) << i;
  check(kv, {&a});
  // Decoding on: a new block takes the least recently unpinned slab (block 0's).
  ASSERT_TRUE(kv.allocate_slots(a, 1).has_value());
  EXPECT_EQ(kv.recent_slabs().slab_of(a.block_table[0]), -1);
  EXPECT_EQ(kv.recent_slabs().evictions(), 1);
  check(kv, {&a});
  kv.free(a);
  check(kv, {});
}

TEST(KvCacheManagerHybrid, WithoutPrefixCachingOldRowsAreFreedAtOnce) {
  KvCacheConfig c = hybrid_config(4);
  c.enable_prefix_caching = false;
  KvCacheManager kv(c);
  Sequence a = make_seq(1, iota_tokens(40));
  // 40 tokens in chunks of 8: a sequence ten blocks long never needs more than four slabs.
  for (int done = 0; done < 40; done += 8) {
    ASSERT_TRUE(kv.allocate_slots(a, 8).has_value()) << done;
    compute(kv, a, done + 8);
    check(kv, {&a});
  }
  EXPECT_EQ(a.block_table.size(), 10u);
  EXPECT_EQ(kv.recent_slabs().num_available(), 3);
  EXPECT_EQ(kv.recent_slabs().evictions(), 0);
  kv.free(a);
  EXPECT_EQ(kv.recent_slabs().num_available(), 4);
  check(kv, {});
}

TEST(KvCacheManagerHybrid, PrefixHitNeedsTheRecentRowsBeforeItsEnd) {
  KvCacheManager kv(hybrid_config(6));
  Sequence a = make_seq(1, iota_tokens(16));
  ASSERT_TRUE(kv.allocate_slots(a, 16).has_value());
  compute(kv, a, 16);
  const std::vector<int32_t> a_blocks = a.block_table;
  kv.free(a);  // all four slabs evictable now, block 3's most recently
  // Two new blocks take the two free slabs, two more evict blocks 0 and 1's rows.
  Sequence f = make_seq(2, iota_tokens(16, 500));
  ASSERT_TRUE(kv.allocate_slots(f, 16).has_value());
  EXPECT_EQ(kv.recent_slabs().slab_of(a_blocks[0]), -1);
  EXPECT_EQ(kv.recent_slabs().slab_of(a_blocks[1]), -1);
  EXPECT_GE(kv.recent_slabs().slab_of(a_blocks[3]), 0);
  // A hit on all of a still works: its first step reads only block 3's rows.
  Sequence b = make_seq(3, iota_tokens(17));
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_EQ(m.blocks.size(), 4u);
  ASSERT_TRUE(kv.allocate_slots(b, 1, &m).has_value());
  EXPECT_EQ(b.num_computed_tokens, 16);
  EXPECT_EQ(b.recent_from_block, 3);
  check(kv, {&f, &b});
  kv.free(b);
  // Once block 3's rows are evicted too, the hit is cut back to where rows remain: here to
  // nothing, since blocks 0-2 lost theirs first.
  Sequence g = make_seq(4, iota_tokens(8, 900));
  ASSERT_TRUE(kv.allocate_slots(g, 8).has_value());
  EXPECT_EQ(kv.recent_slabs().slab_of(a_blocks[3]), -1);
  Sequence c = make_seq(5, iota_tokens(17));
  EXPECT_TRUE(kv.get_computed_blocks(c).blocks.empty());
  check(kv, {&f, &g});
  kv.free(f);
  kv.free(g);
  check(kv, {});
}

TEST(KvCacheManagerHybrid, ConcurrentDuplicateKeepsItsPinnedRows) {
  KvCacheManager kv(hybrid_config(8));
  Sequence a = make_seq(1, iota_tokens(10));
  Sequence b = make_seq(2, iota_tokens(10));
  ASSERT_TRUE(kv.allocate_slots(a, 10).has_value());
  ASSERT_TRUE(kv.allocate_slots(b, 10).has_value());
  compute(kv, a, 10);
  compute(kv, b, 10);  // b switches to a's cached blocks, pinning their rows
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_GE(kv.recent_slabs().slab_of(b.block_table[1]), 0);
  EXPECT_EQ(kv.recent_slabs().pins(b.block_table[1]), 2);
  check(kv, {&a, &b});
  kv.free(a);
  check(kv, {&b});
  kv.free(b);
  check(kv, {});
}

TEST(KvCacheManagerHybrid, PartialTierLoadFallsBackToTheMemoryPrefix) {
  FakeTier tier;
  KvCacheManager kv(hybrid_config(8, 6), &tier);
  Sequence a = make_seq(1, iota_tokens(17));
  ASSERT_TRUE(kv.allocate_slots(a, 17).has_value());
  compute(kv, a, 17);
  kv.free(a);
  Sequence filler = make_seq(2, iota_tokens(24, 300));
  ASSERT_TRUE(kv.allocate_slots(filler, 24).has_value());  // evicts all of a's blocks
  kv.free(filler);
  tier.fail_after = 2;
  Sequence c = make_seq(3, iota_tokens(17));
  PrefixMatch m = kv.get_computed_blocks(c);
  ASSERT_TRUE(m.blocks.empty());
  ASSERT_EQ(m.num_tier_blocks, 4);
  ASSERT_TRUE(kv.allocate_slots(c, 1, &m).has_value());
  // Two of four loaded: dropped (the rows before block 2 were never loaded), computed from 0;
  // only the block the step writes is kept.
  EXPECT_EQ(c.num_computed_tokens, 0);
  EXPECT_EQ(c.block_table.size(), 1u);
  check(kv, {&c});
  kv.free(c);
  check(kv, {});
}


// Records the block-state copies a bounded replay asks for.
struct FakeCopier : BlockStateCopier {
  std::vector<std::pair<int32_t, int32_t>> copies;
  void copy_block_state(int32_t from, int32_t to) override { copies.emplace_back(from, to); }
};

// Caches a's 16 tokens (4 blocks), then lets a filler evict every block's recent rows.
std::vector<int32_t> cache_then_lose_rows(KvCacheManager& kv, Sequence& filler) {
  Sequence a = make_seq(1, iota_tokens(16));
  EXPECT_TRUE(kv.allocate_slots(a, 16).has_value());
  compute(kv, a, 16);
  const std::vector<int32_t> blocks = a.block_table;
  kv.free(a);
  EXPECT_TRUE(kv.allocate_slots(filler, 24).has_value());
  for (int32_t b : blocks) EXPECT_EQ(kv.recent_slabs().slab_of(b), -1) << b;
  return blocks;
}

TEST(KvCacheManagerHybrid, BoundedReplayCopiesTheLastBlocksAndCachesNothingApproximate) {
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(6), nullptr, &copier);
  Sequence filler = make_seq(2, iota_tokens(24, 500));
  const std::vector<int32_t> a_blocks = cache_then_lose_rows(kv, filler);
  // An exact request: the hit is cut to where rows remain (nothing).
  Sequence exact = make_seq(3, iota_tokens(21));
  EXPECT_TRUE(kv.get_computed_blocks(exact).blocks.empty());
  // A bounded one keeps the whole hit and replays its last recent_tokens (4) tokens.
  Sequence b = make_seq(4, iota_tokens(21));
  b.allow_bounded_replay = true;
  kv.free(filler);
  PrefixMatch m = kv.get_computed_blocks(b);
  ASSERT_EQ(m.blocks.size(), 4u);
  EXPECT_EQ(m.num_replay_tokens, 4);
  EXPECT_EQ(m.num_tokens(4), 12);
  ASSERT_TRUE(kv.allocate_slots(b, 21 - 12, &m).has_value());
  EXPECT_EQ(b.num_computed_tokens, 12);
  EXPECT_EQ(b.replay_start, 12);
  EXPECT_EQ(b.replay_end, 16);
  EXPECT_EQ(b.num_replayed_tokens, 4);
  // Blocks 0-2 are shared with the cache; block 3 is a private copy with a pinned slab.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b.block_table[i], a_blocks[i]) << i;
  EXPECT_NE(b.block_table[3], a_blocks[3]);
  ASSERT_EQ(copier.copies.size(), 1u);
  EXPECT_EQ(copier.copies[0], std::make_pair(a_blocks[3], b.block_table[3]));
  EXPECT_GT(kv.recent_slabs().pins(b.block_table[3]), 0);
  EXPECT_EQ(kv.stats().replays, 1);
  EXPECT_EQ(kv.stats().replayed_tokens, 4);
  check(kv, {&b});
  // Computing on never enters the approximate blocks (3 on) into the prefix cache.
  compute(kv, b, 21);
  EXPECT_EQ(b.num_committed_blocks, 3);
  EXPECT_FALSE(kv.tree().contains(b.block_table[3]));
  EXPECT_FALSE(kv.tree().contains(b.block_table[4]));
  check(kv, {&b});
  kv.free(b);
  EXPECT_EQ(b.replay_end, 0);
  check(kv, {});
  // The cached original of block 3 kept its (exact) state: a later hit still finds it.
  Sequence c = make_seq(5, iota_tokens(17));
  c.allow_bounded_replay = true;
  PrefixMatch mc = kv.get_computed_blocks(c);
  ASSERT_EQ(mc.blocks.size(), 4u);
  EXPECT_EQ(mc.blocks[3], a_blocks[3]);
}

// a computes 17 tokens (its prompt's checkpoint: after block 4) and finishes (its end's: after
// block 4 as well, not written twice); a filler then evicts every block to the fake tier.
void cache_in_tier_only(KvCacheManager& kv, FakeTier& tier) {
  Sequence a = make_seq(1, iota_tokens(17));
  ASSERT_TRUE(kv.allocate_slots(a, 17).has_value());
  compute(kv, a, 17);
  a.finish_reason = FinishReason::kStop;
  kv.free(a);
  ASSERT_EQ(tier.checkpoints.size(), 1u);
  EXPECT_EQ(tier.checkpoints[0], a.block_hashes[3]);
  EXPECT_EQ(tier.checkpoint_sizes[0], 1);  // recent_tokens 4: the last block's rows
  Sequence filler = make_seq(2, iota_tokens(24, 300));
  ASSERT_TRUE(kv.allocate_slots(filler, 24).has_value());
  kv.free(filler);
}

// a's first 13 tokens (3 full blocks and one token of the 4th), then 8 others.
std::vector<int32_t> shares_three_blocks_with_a() {
  std::vector<int32_t> tokens = iota_tokens(13);
  for (int32_t t : iota_tokens(8, 900)) tokens.push_back(t);
  return tokens;
}

TEST(KvCacheManagerHybrid, TierHitWithACheckpointRestoresItsRowsExactly) {
  FakeTier tier;
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(8, 6), &tier, &copier);
  cache_in_tier_only(kv, tier);
  Sequence c = make_seq(3, iota_tokens(17));
  c.allow_bounded_replay = true;  // the checkpoint reaches as far: no replay
  PrefixMatch m = kv.get_computed_blocks(c);
  ASSERT_TRUE(m.blocks.empty());
  ASSERT_EQ(m.num_tier_blocks, 4);
  EXPECT_EQ(m.num_replay_tokens, 0);
  ASSERT_TRUE(kv.allocate_slots(c, 1, &m).has_value());
  EXPECT_EQ(c.num_computed_tokens, 16);
  ASSERT_EQ(tier.checkpoint_loads.size(), 1u);
  EXPECT_EQ(tier.checkpoint_loads[0].first, 4);
  EXPECT_EQ(tier.checkpoint_loads[0].second, std::vector<int32_t>{c.block_table[3]});
  EXPECT_GE(kv.recent_slabs().slab_of(c.block_table[3]), 0);
  EXPECT_EQ(kv.stats().checkpoints_loaded, 1);
  check(kv, {&c});
  kv.free(c);
  check(kv, {});
}

// c shares a's first 3 blocks only: the tier has them but no checkpoint at their end. Exact:
// nothing restored. Bounded: the 3 blocks load (paged state), the last 4 tokens replay into a
// private block, the blocks before the replay enter the prefix cache.
TEST(KvCacheManagerHybrid, TierHitWithoutACheckpointIsReplayedOrRecomputed) {
  FakeTier tier;
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(8, 6), &tier, &copier);
  cache_in_tier_only(kv, tier);
  const std::vector<int32_t> tokens = shares_three_blocks_with_a();
  Sequence exact = make_seq(3, tokens);
  PrefixMatch me = kv.get_computed_blocks(exact);
  EXPECT_TRUE(me.blocks.empty());
  EXPECT_EQ(me.num_tier_blocks, 0);
  Sequence b = make_seq(4, tokens);
  b.allow_bounded_replay = true;
  PrefixMatch m = kv.get_computed_blocks(b);
  ASSERT_TRUE(m.blocks.empty());
  ASSERT_EQ(m.num_tier_blocks, 3);
  ASSERT_EQ(m.num_replay_tokens, 4);
  ASSERT_TRUE(kv.allocate_slots(b, 21 - 8, &m).has_value());
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(b.replay_start, 8);
  EXPECT_EQ(b.replay_end, 12);
  EXPECT_EQ(b.num_committed_blocks, 2);
  EXPECT_TRUE(kv.tree().contains(b.block_table[0]));
  EXPECT_TRUE(kv.tree().contains(b.block_table[1]));
  EXPECT_FALSE(kv.tree().contains(b.block_table[2]));
  EXPECT_GT(kv.recent_slabs().pins(b.block_table[2]), 0);
  EXPECT_EQ(kv.stats().tier_loaded_blocks, 3);
  EXPECT_EQ(kv.stats().replays, 1);
  EXPECT_TRUE(copier.copies.empty());  // tier blocks are private already
  EXPECT_TRUE(tier.checkpoint_loads.empty());
  check(kv, {&b});
  b.finish_reason = FinishReason::kStop;
  compute(kv, b, 21);
  kv.free(b);  // its rows are approximate from block 2 on: no checkpoint
  EXPECT_EQ(tier.checkpoints.size(), 1u);
  check(kv, {});
}

// The tier fails to supply a replay's blocks: nothing is kept, the sequence computes from its
// exact in-memory prefix (here nothing).
TEST(KvCacheManagerHybrid, FailedTierLoadOfAReplayFallsBackToTheExactPrefix) {
  FakeTier tier;
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(8, 6), &tier, &copier);
  cache_in_tier_only(kv, tier);
  const std::vector<int32_t> tokens = shares_three_blocks_with_a();
  Sequence b = make_seq(4, tokens);
  b.allow_bounded_replay = true;
  PrefixMatch m = kv.get_computed_blocks(b);
  ASSERT_EQ(m.num_tier_blocks, 3);
  tier.fail_after = tier.loads + 1;
  ASSERT_TRUE(kv.allocate_slots(b, 8, &m).has_value());
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(b.replay_end, 0);
  EXPECT_EQ(kv.stats().replays, 0);
  check(kv, {&b});
  kv.free(b);
  check(kv, {});
}

// Each prefix end the tier is asked about costs a store query (an SSD stat on a miss) on the
// engine thread. a's 10 blocks are in the tier with checkpoints after blocks 10 and 3. A prompt
// sharing 9 of them: "exact" asks about every end from 9 down to the furthest checkpoint (3);
// "bounded" asks about the hit's end only, since the replay of the whole hit beats any shorter
// checkpoint; a bounded prompt whose hit ends at a checkpoint restores it, after one query.
TEST(KvCacheManagerHybrid, BoundedAdmissionAsksTheTierAboutOneCheckpointEnd) {
  FakeTier tier;
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(16, 12), &tier, &copier);
  Sequence a = make_seq(1, iota_tokens(41));
  ASSERT_TRUE(kv.allocate_slots(a, 41).has_value());
  compute(kv, a, 41);
  a.finish_reason = FinishReason::kStop;
  kv.free(a);
  ASSERT_EQ(tier.checkpoints.size(), 1u);  // after block 10 (prompt and end alike)
  tier.checkpoints.push_back(a.block_hashes[2]);  // as an earlier 13-token prompt leaves one
  Sequence filler = make_seq(2, iota_tokens(48, 300));
  ASSERT_TRUE(kv.allocate_slots(filler, 48).has_value());
  kv.free(filler);
  std::vector<int32_t> tokens = iota_tokens(37);  // a's first 9 blocks and a token, then others
  for (int32_t t : iota_tokens(8, 900)) tokens.push_back(t);

  Sequence exact = make_seq(3, tokens);
  PrefixMatch me = kv.get_computed_blocks(exact);
  EXPECT_TRUE(me.blocks.empty());
  EXPECT_EQ(me.num_tier_blocks, 3);  // the furthest checkpoint within the 9-block hit
  EXPECT_EQ(me.num_replay_tokens, 0);
  EXPECT_EQ(tier.checkpoint_queries, 7);

  tier.checkpoint_queries = 0;
  Sequence bounded = make_seq(4, tokens);
  bounded.allow_bounded_replay = true;
  PrefixMatch mb = kv.get_computed_blocks(bounded);
  EXPECT_EQ(mb.num_tier_blocks, 9);
  EXPECT_EQ(mb.num_replay_tokens, 4);
  EXPECT_EQ(tier.checkpoint_queries, 1);

  tier.checkpoint_queries = 0;
  Sequence whole = make_seq(5, iota_tokens(41));
  whole.allow_bounded_replay = true;
  PrefixMatch mw = kv.get_computed_blocks(whole);
  EXPECT_EQ(mw.num_tier_blocks, 10);
  EXPECT_EQ(mw.num_replay_tokens, 0);
  EXPECT_EQ(tier.checkpoint_queries, 1);
  check(kv, {});
}

TEST(KvCacheManagerHybrid, NoReplayForAHitNoLongerThanTheReplay) {
  FakeCopier copier;
  KvCacheManager kv(hybrid_config(6), nullptr, &copier);
  Sequence a = make_seq(1, iota_tokens(4));
  ASSERT_TRUE(kv.allocate_slots(a, 4).has_value());
  compute(kv, a, 4);
  kv.free(a);
  Sequence filler = make_seq(2, iota_tokens(24, 500));
  ASSERT_TRUE(kv.allocate_slots(filler, 24).has_value());
  // A 4-token hit without rows would replay all of itself: computed from scratch instead.
  Sequence b = make_seq(3, iota_tokens(9));
  b.allow_bounded_replay = true;
  PrefixMatch m = kv.get_computed_blocks(b);
  EXPECT_TRUE(m.blocks.empty());
  EXPECT_EQ(m.num_replay_tokens, 0);
  kv.free(filler);
  check(kv, {});
}

}  // namespace
}  // namespace deepinfer::engine
