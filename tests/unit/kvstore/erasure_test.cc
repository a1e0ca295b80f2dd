// Reed-Solomon: every pattern of up to m lost shards rebuilds bit-exact; m+1 losses refuse.
#include "deepinfer/kvstore/erasure.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer::kvstore {
namespace {

void check_code(int k, int m, size_t len) {
  auto code = ErasureCode::create(k, m);
  ASSERT_TRUE(code.is_ok()) << code.status().message();
  const int n = k + m;
  std::mt19937 rng(k * 100 + m);
  std::vector<std::vector<uint8_t>> orig(n, std::vector<uint8_t>(len));
  for (int i = 0; i < k; ++i) {
    for (auto& b : orig[i]) b = static_cast<uint8_t>(rng());
  }
  std::vector<uint8_t*> ptr(n);
  for (int i = 0; i < n; ++i) ptr[i] = orig[i].data();
  code->encode(len, ptr.data(), ptr.data() + k);
  // Every subset of lost shards of size <= m (for n <= 12 that is at most 79 patterns).
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    int lost = __builtin_popcount(mask);
    if (lost > m + 1) continue;
    auto work = orig;
    std::vector<bool> present(n, true);
    std::vector<uint8_t*> wp(n);
    for (int i = 0; i < n; ++i) {
      wp[i] = work[i].data();
      if (mask >> i & 1) {
        present[i] = false;
        std::fill(work[i].begin(), work[i].end(), 0xEE);
      }
    }
    bool ok = code->reconstruct(len, wp.data(), present);
    if (lost > m) {
      EXPECT_FALSE(ok) << k << "+" << m << " mask " << mask;
      continue;
    }
    ASSERT_TRUE(ok) << k << "+" << m << " mask " << mask;
    for (int i = 0; i < n; ++i) ASSERT_EQ(work[i], orig[i]) << "shard " << i << " mask " << mask;
  }
}

TEST(ErasureCode, TenPlusTwo) { check_code(10, 2, 640); }
TEST(ErasureCode, FourPlusTwo) { check_code(4, 2, 4096); }
TEST(ErasureCode, SixPlusThree) { check_code(6, 3, 64); }
TEST(ErasureCode, NoParity) { check_code(3, 0, 128); }

TEST(ErasureCode, RejectsBadParameters) {
  EXPECT_FALSE(ErasureCode::create(0, 2).is_ok());
  EXPECT_FALSE(ErasureCode::create(4, -1).is_ok());
  EXPECT_FALSE(ErasureCode::create(60, 10).is_ok());
}

}  // namespace
}  // namespace deepinfer::kvstore
