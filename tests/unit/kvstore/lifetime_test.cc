// Lifetime with an injected clock: TTL per traffic class, refresh on hit, the sweeper deleting
// expired entries, and capacity eviction order; plus the admin stat/gc views of the same.
#include <gtest/gtest.h>

#include <atomic>

#include "deepinfer/kvstore/admin.h"
#include "deepinfer/kvstore/kv_store.h"
#include "deepinfer/kvstore/shard_format.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

using testing::make_block;
using testing::TempDir;
using testing::test_key;

constexpr size_t kBlock = 64 * 1024;
constexpr int64_t kDay = 86400;
constexpr int64_t kStart = 1'800'000'000;

struct Fixture {
  TempDir dir;
  std::atomic<int64_t> now{kStart};
  KvStoreConfig config() {
    KvStoreConfig c;
    c.targets = dir.targets(6);
    c.block_bytes = kBlock;
    c.host_tier_bytes = 0;
    c.sweep_interval_s = 0;
    c.touch_interval_s = 1;
    c.clock = [this] { return now.load(); };
    return c;
  }
};

void put(KvStore& s, const BlockKey& k, TrafficClass c) {
  auto b = make_block(k, kBlock);
  const uint8_t* src = b.data();
  ASSERT_EQ(s.batch_put(std::span(&k, 1), std::span(&src, 1), c), 1u);
  s.flush();
}

bool has(KvStore& s, const BlockKey& k) { return s.batch_exists(std::span(&k, 1)) == 1; }

bool get(KvStore& s, const BlockKey& k) {
  std::vector<uint8_t> out(kBlock);
  uint8_t* dst = out.data();
  if (s.batch_get(std::span(&k, 1), std::span(&dst, 1)) != 1) return false;
  EXPECT_EQ(out, make_block(k, kBlock));
  return true;
}

TEST(KvLifetime, TtlByClassRefreshedOnHit) {
  Fixture f;
  auto s = KvStore::open(f.config());
  ASSERT_TRUE(s.is_ok());
  KvStore& st = **s;
  BlockKey a0 = test_key(0, 1), a1 = test_key(1, 1), c0 = test_key(0, 2), c1 = test_key(1, 2);
  put(st, a0, TrafficClass::kAgent);
  put(st, a1, TrafficClass::kAgent);
  put(st, c0, TrafficClass::kChat);
  put(st, c1, TrafficClass::kChat);
  f.now = kStart + 2 * kDay;
  EXPECT_TRUE(get(st, a0));  // refreshed: agent a0 now lives until day 5
  EXPECT_TRUE(get(st, c0));  // chat c0 until day 9
  f.now = kStart + 3 * kDay + 1;
  EXPECT_TRUE(has(st, a0));
  EXPECT_FALSE(has(st, a1));  // agent TTL (3 days) ran out
  EXPECT_FALSE(get(st, a1));
  EXPECT_TRUE(has(st, c1));
  auto sweep = st.sweep_now();
  EXPECT_EQ(sweep.expired_entries, 1u);
  auto stat = stat_store(f.config().targets, f.now);
  ASSERT_TRUE(stat.is_ok());
  EXPECT_EQ(stat->entries, 3u);  // a1's files are gone
  EXPECT_EQ(stat->entries_by_class[0], 1u);
  EXPECT_EQ(stat->entries_by_class[1], 2u);
  f.now = kStart + 5 * kDay + 1;
  EXPECT_FALSE(get(st, a0));
  f.now = kStart + 7 * kDay + 1;
  EXPECT_FALSE(has(st, c1));  // chat TTL (7 days)
  EXPECT_TRUE(has(st, c0));   // refreshed on day 2 (exists does not refresh)
  f.now = kStart + 9 * kDay + 1;
  EXPECT_FALSE(get(st, c0));
  EXPECT_GE(st.stats().ssd.expired_misses, 2u);
  // The admin gc sees the same expiry (in the files' mtime) without any config.
  auto gc = gc_store(f.config().targets, GcOptions{.now = f.now});
  ASSERT_TRUE(gc.is_ok());
  EXPECT_EQ(gc->expired_entries, 3u);
  auto empty = stat_store(f.config().targets, f.now);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->entries, 0u);
  EXPECT_EQ(empty->bytes, 0u);
}

TEST(KvLifetime, PutOfExistingKeyRefreshesButNeverShortens) {
  Fixture f;
  auto s = KvStore::open(f.config());
  ASSERT_TRUE(s.is_ok());
  BlockKey k = test_key(0, 9), j = test_key(1, 9);
  put(**s, k, TrafficClass::kChat);
  put(**s, j, TrafficClass::kAgent);
  f.now = kStart + kDay;
  put(**s, k, TrafficClass::kAgent);  // chat expiry (day 7) beats agent (day 4): kept
  put(**s, j, TrafficClass::kChat);   // agent (day 3) extended to day 8
  EXPECT_EQ((*s)->stats().ssd.entries_already_present, 2u);
  f.now = kStart + 6 * kDay;
  EXPECT_TRUE(has(**s, k));
  EXPECT_TRUE(has(**s, j));
  f.now = kStart + 7 * kDay + 1;
  EXPECT_FALSE(has(**s, k));
  EXPECT_TRUE(has(**s, j));
}

TEST(KvLifetime, CapacityEvictsLeastRecentlyUsed) {
  Fixture f;
  auto c = f.config();
  // 4+2 on 6 targets: one shard file per entry per target.
  const uint64_t file = shard_file_bytes(shard_bytes_for(kBlock, 4));
  c.target_capacity_bytes = 5 * file;
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  KvStore& st = **s;
  std::vector<BlockKey> keys;
  for (int i = 0; i < 8; ++i) {
    keys.push_back(test_key(i, 3));
    f.now = kStart + 10 * i;
    put(st, keys.back(), TrafficClass::kChat);
  }
  f.now = kStart + 100;
  EXPECT_TRUE(get(st, keys[1]));  // 1 becomes the most recently used
  auto sweep = st.sweep_now();
  EXPECT_EQ(sweep.evicted_entries, 3u);
  std::vector<bool> alive;
  for (auto& k : keys) alive.push_back(has(st, k));
  EXPECT_EQ(alive, (std::vector<bool>{false, true, false, false, true, true, true, true}));
  auto stat = stat_store(c.targets, f.now);
  ASSERT_TRUE(stat.is_ok());
  for (const auto& t : stat->targets) EXPECT_LE(t.bytes, c.target_capacity_bytes) << t.path;
  // Admin gc with a smaller budget evicts in the same order.
  auto gc = gc_store(c.targets, GcOptions{.now = f.now, .target_capacity_bytes = 3 * file});
  ASSERT_TRUE(gc.is_ok());
  EXPECT_EQ(gc->evicted_entries, 2u);
  EXPECT_FALSE(has(st, keys[4]));
  EXPECT_FALSE(has(st, keys[5]));
  EXPECT_TRUE(has(st, keys[6]));
  EXPECT_TRUE(has(st, keys[1]));
}

TEST(KvLifetime, AdminRejectsEmptyTargetList) {
  auto r = stat_store({});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  TempDir dir;
  auto missing = stat_store({dir.path() + "/nope"});
  ASSERT_TRUE(missing.is_ok());
  EXPECT_FALSE(missing->targets[0].present);
}

}  // namespace
}  // namespace deepinfer::kvstore
