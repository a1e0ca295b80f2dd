// KvStore end to end: round trips through the SSD tier (each I/O mode), prefix semantics,
// namespace isolation, prefetch, and the never-blocking write queue.
#include "deepinfer/kvstore/kv_store.h"

#include <gtest/gtest.h>

#include "deepinfer/kvstore/admin.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

using testing::make_block;
using testing::TempDir;
using testing::test_key;

constexpr size_t kBlock = 64 * 1024;

KvStoreConfig config(const TempDir& dir, int targets) {
  KvStoreConfig c;
  c.targets = dir.targets(targets);
  c.block_bytes = kBlock;
  c.host_tier_bytes = 0;  // force reads through the SSD tier
  c.sweep_interval_s = 0;
  return c;
}

void put_all(KvStore& s, const std::vector<BlockKey>& keys, TrafficClass c = TrafficClass::kChat) {
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<const uint8_t*> src;
  for (auto& k : keys) blocks.push_back(make_block(k, kBlock));
  for (auto& b : blocks) src.push_back(b.data());
  ASSERT_EQ(s.batch_put(keys, src, c), keys.size());
  s.flush();
}

// Reads keys and checks each block is bit-exact; returns the prefix length read.
size_t get_and_check(KvStore& s, const std::vector<BlockKey>& keys) {
  std::vector<std::vector<uint8_t>> out(keys.size(), std::vector<uint8_t>(kBlock));
  std::vector<uint8_t*> dst;
  for (auto& o : out) dst.push_back(o.data());
  size_t n = s.batch_get(keys, dst);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], make_block(keys[i], kBlock)) << "block " << i;
  return n;
}

std::vector<BlockKey> keys(int n, uint64_t salt = 0) {
  std::vector<BlockKey> k;
  for (int i = 0; i < n; ++i) k.push_back(test_key(i, salt));
  return k;
}

TEST(KvStore, DefaultsToTenPlusTwoOnTwelveTargets) {
  TempDir dir;
  auto s = KvStore::open(config(dir, 12));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)->data_shards(), 10);
  EXPECT_EQ((*s)->parity_shards(), 2);
  TempDir dir6;  // another store: the first one's manifest names 12 targets
  auto c = config(dir6, 6);
  auto s6 = KvStore::open(c);
  ASSERT_TRUE(s6.is_ok());
  EXPECT_EQ((*s6)->data_shards(), 4);
  EXPECT_EQ((*s6)->parity_shards(), 2);
  c.data_shards = 5;
  c.parity_shards = 2;  // 7 shards on 6 targets: refused with a message
  auto bad = KvStore::open(c);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("targets"), std::string::npos);
  c.data_shards = 0;
  c.block_bytes = 0;
  EXPECT_FALSE(KvStore::open(c).is_ok());
}

void round_trip(IoMode mode, bool direct) {
  TempDir dir;
  auto c = config(dir, 12);
  c.io_mode = mode;
  c.direct_io = direct;
  auto ks = keys(8);
  {
    auto s = KvStore::open(c);
    ASSERT_TRUE(s.is_ok());
    put_all(**s, ks);
    EXPECT_EQ((*s)->stats().ssd.entries_written, 8u);
  }
  auto s = KvStore::open(c);  // a fresh process view: nothing in RAM
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*s)->batch_exists(ks), 8u);
  EXPECT_EQ(get_and_check(**s, ks), 8u);
  EXPECT_EQ((*s)->stats().ssd_hits, 8u);
  EXPECT_EQ((*s)->stats().ssd.reconstructions, 0u);
}

TEST(KvStore, RoundTripAuto) { round_trip(IoMode::kAuto, true); }
TEST(KvStore, RoundTripPreadDirect) { round_trip(IoMode::kPread, true); }
TEST(KvStore, RoundTripBuffered) { round_trip(IoMode::kAuto, false); }

TEST(KvStore, PrefixStopsAtFirstMiss) {
  TempDir dir;
  auto s = KvStore::open(config(dir, 6));
  ASSERT_TRUE(s.is_ok());
  auto ks = keys(6);
  put_all(**s, {ks[0], ks[1], ks[2], ks[4], ks[5]});
  EXPECT_EQ((*s)->batch_exists(ks), 3u);
  EXPECT_EQ(get_and_check(**s, ks), 3u);
  (*s)->remove(ks[1]);
  EXPECT_EQ((*s)->batch_exists(ks), 1u);
  EXPECT_EQ(get_and_check(**s, ks), 1u);
}

TEST(KvStore, OtherNamespaceCannotRead) {
  TempDir dir;
  auto s = KvStore::open(config(dir, 6));
  ASSERT_TRUE(s.is_ok());
  Namespace a{"m", "r1", 1, "bf16", 4, 0, 1}, b = a;
  b.revision = "r2";
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8};
  auto ka = prefix_keys(a, toks), kb = prefix_keys(b, toks);
  put_all(**s, ka);
  EXPECT_EQ((*s)->batch_exists(ka), 2u);
  EXPECT_EQ((*s)->batch_exists(kb), 0u);
  EXPECT_EQ(get_and_check(**s, kb), 0u);
}

TEST(KvStore, HostTierServesWithoutSsd) {
  TempDir dir;
  auto c = config(dir, 6);
  c.host_tier_bytes = 8 * kBlock;
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto ks = keys(4);
  put_all(**s, ks);
  EXPECT_EQ(get_and_check(**s, ks), 4u);
  EXPECT_EQ((*s)->stats().host_hits, 4u);
  EXPECT_EQ((*s)->stats().ssd_hits, 0u);
  // Host-only store (no targets) works too.
  KvStoreConfig h;
  h.block_bytes = kBlock;
  h.host_tier_bytes = 2 * kBlock;
  auto hs = KvStore::open(h);
  ASSERT_TRUE(hs.is_ok());
  put_all(**hs, ks);
  EXPECT_EQ((*hs)->batch_exists(ks), 0u);  // LRU kept only the last two
  EXPECT_EQ((*hs)->batch_exists(std::vector<BlockKey>{ks[2], ks[3]}), 2u);
}

TEST(KvStore, PrefetchLoadsIntoHostTier) {
  TempDir dir;
  auto c = config(dir, 6);
  auto ks = keys(8);
  {
    auto s = KvStore::open(c);
    ASSERT_TRUE(s.is_ok());
    put_all(**s, ks);
  }
  c.host_tier_bytes = 16 * kBlock;
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto more = ks;
  more.push_back(test_key(999));  // not stored: prefix is 8
  auto fut = (*s)->prefetch(more);
  EXPECT_EQ(fut.get(), 8u);
  EXPECT_EQ((*s)->stats().ssd_hits, 8u);
  EXPECT_EQ(get_and_check(**s, ks), 8u);
  EXPECT_EQ((*s)->stats().host_hits, 8u);  // served from RAM after the prefetch
  EXPECT_EQ((*s)->stats().ssd_hits, 8u);
}

TEST(KvStore, FullWriteQueueDropsInsteadOfBlocking) {
  TempDir dir;
  auto c = config(dir, 6);
  c.write_queue_depth = 2;
  auto ks = keys(64);
  size_t queued = 0;
  {
    auto s = KvStore::open(c);
    ASSERT_TRUE(s.is_ok());
    std::vector<uint8_t> block(kBlock, 7);
    std::vector<const uint8_t*> src(ks.size(), block.data());
    queued = (*s)->batch_put(ks, src, TrafficClass::kAgent);
    auto st = (*s)->stats();
    EXPECT_EQ(queued + st.puts_dropped, ks.size());
    EXPECT_GE(queued, 1u);
    (*s)->flush();
    EXPECT_EQ((*s)->stats().ssd.entries_written, queued);
  }
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  size_t on_ssd = 0;
  for (auto& k : ks) on_ssd += (*s)->batch_exists(std::span(&k, 1));
  EXPECT_EQ(on_ssd, queued);
}

// Sliding-window checkpoint parts reach the SSD whole or not at all, and only within half the
// write queue: a checkpoint of more parts than that goes only to the RAM tier, one that fits is
// written completely, with its kind in the shard headers.
TEST(KvStore, CheckpointPartsAreQueuedWholeWithinHalfTheQueue) {
  TempDir dir;
  auto c = config(dir, 6);
  c.write_queue_depth = 8;
  const auto ks = keys(9);
  const std::span<const BlockKey> too_many(ks.data(), 5), fitting(ks.data() + 5, 4);
  std::vector<uint8_t> block(kBlock, 3);
  std::vector<const uint8_t*> src(5, block.data());
  {
    auto s = KvStore::open(c);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ((*s)->batch_put(too_many, src, TrafficClass::kChat, EntryKind::kSwaCheckpoint), 0u);
    EXPECT_EQ((*s)->stats().puts_dropped, 5u);
    (*s)->flush();
    EXPECT_EQ((*s)->batch_put(fitting, std::span(src.data(), 4), TrafficClass::kChat,
                              EntryKind::kSwaCheckpoint),
              4u);
    (*s)->flush();
  }
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*s)->batch_exists(std::span(too_many.data(), 1)), 0u);
  EXPECT_EQ((*s)->batch_exists(fitting), 4u);
  auto stat = stat_store(c.targets);
  ASSERT_TRUE(stat.is_ok()) << stat.status().message();
  EXPECT_EQ(stat->entries_by_kind[int(EntryKind::kSwaCheckpoint)], 4u);
  EXPECT_EQ(stat->entries_by_kind[int(EntryKind::kKvBlock)], 0u);
}

}  // namespace
}  // namespace deepinfer::kvstore
