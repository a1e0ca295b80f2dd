// Host tier: LRU order under a byte budget, expiry, refresh on hit.
#include "deepinfer/kvstore/host_tier.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

using testing::test_key;

BlockBytes bytes(size_t n, uint8_t v) { return std::make_shared<std::vector<uint8_t>>(n, v); }

TEST(HostTier, EvictsLeastRecentlyUsed) {
  HostTier tier(300);
  tier.put(test_key(1), bytes(100, 1), 1000, 0);
  tier.put(test_key(2), bytes(100, 2), 1000, 0);
  tier.put(test_key(3), bytes(100, 3), 1000, 0);
  uint8_t buf[100];
  ASSERT_TRUE(tier.get(test_key(1), buf, 100, 1));  // 1 becomes most recent; 2 is now oldest
  EXPECT_EQ(buf[0], 1);
  tier.put(test_key(4), bytes(100, 4), 1000, 2);
  EXPECT_TRUE(tier.contains(test_key(1), 2));
  EXPECT_FALSE(tier.contains(test_key(2), 2));
  EXPECT_TRUE(tier.contains(test_key(3), 2));
  EXPECT_TRUE(tier.contains(test_key(4), 2));
  EXPECT_EQ(tier.bytes(), 300u);
  EXPECT_EQ(tier.evictions(), 1u);
  tier.put(test_key(5), bytes(301, 5), 1000, 2);  // larger than the tier: not kept
  EXPECT_FALSE(tier.contains(test_key(5), 2));
  EXPECT_FALSE(tier.get(test_key(1), buf, 99, 2));  // wrong size is a miss, not an overflow
}

TEST(HostTier, ExpiresAndRefreshesOnHit) {
  HostTier tier(1000);
  tier.put(test_key(1), bytes(10, 1), 100, 0);
  tier.put(test_key(2), bytes(10, 2), 100, 0);
  uint8_t buf[10];
  ASSERT_TRUE(tier.get(test_key(1), buf, 10, 90));  // refreshed: now expires at 190
  EXPECT_TRUE(tier.contains(test_key(1), 150));
  EXPECT_FALSE(tier.contains(test_key(2), 150));
  EXPECT_FALSE(tier.get(test_key(1), buf, 10, 190));
  EXPECT_EQ(tier.entries(), 0u);
}

}  // namespace
}  // namespace deepinfer::kvstore
