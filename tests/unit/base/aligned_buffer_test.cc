#include "deepinfer/base/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace deepinfer {
namespace {

bool all_zero(const AlignedBuffer<uint8_t>& b) {
  for (size_t i = 0; i < b.size(); i += 4093)
    if (b[i] != 0) return false;
  return b.size() == 0 || b[b.size() - 1] == 0;
}

TEST(AlignedBuffer, SmallBuffersAreZeroedAndVectorAligned) {
  AlignedBuffer<float> b(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer<float>::kAlignment, 0u);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0.0f);
}

TEST(AlignedBuffer, LargeBuffersAreZeroedAndHugePageAligned) {
  // Sizes around the 2 MiB threshold and not multiples of it.
  for (size_t bytes : {AlignedBuffer<uint8_t>::kLargeBytes - 1, AlignedBuffer<uint8_t>::kLargeBytes,
                       AlignedBuffer<uint8_t>::kLargeBytes * 3 + 12345}) {
    AlignedBuffer<uint8_t> b(bytes);
    ASSERT_EQ(b.size(), bytes);
    EXPECT_TRUE(all_zero(b)) << bytes;
    if (bytes >= AlignedBuffer<uint8_t>::kLargeBytes) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer<uint8_t>::kLargeBytes, 0u);
    }
    // The whole range is writable.
    b[0] = 1, b[bytes - 1] = 2;
    EXPECT_EQ(b[0] + b[bytes - 1], 3);
  }
}

TEST(AlignedBuffer, ResizeDiscardsContentsAndReadsAsZerosAcrossTheThreshold) {
  AlignedBuffer<uint8_t> b(AlignedBuffer<uint8_t>::kLargeBytes * 2);
  std::memset(b.data(), 7, b.size());
  b.resize(AlignedBuffer<uint8_t>::kLargeBytes * 4);  // large -> larger
  EXPECT_TRUE(all_zero(b));
  std::memset(b.data(), 7, b.size());
  b.resize(100);  // large -> small
  EXPECT_TRUE(all_zero(b));
  b.resize(AlignedBuffer<uint8_t>::kLargeBytes);  // small -> large
  EXPECT_TRUE(all_zero(b));
  b.resize(0);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, MovesHandOverTheMapping) {
  AlignedBuffer<uint8_t> a(AlignedBuffer<uint8_t>::kLargeBytes * 2);
  a[5] = 9;
  uint8_t* p = a.data();
  AlignedBuffer<uint8_t> b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b[5], 9);
  EXPECT_EQ(a.data(), nullptr);
  AlignedBuffer<uint8_t> c(64);
  c = std::move(b);  // frees c's small buffer, takes b's map
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c[5], 9);
}

// Only the pages a large buffer's user touches become resident: a big KV pool costs nothing at
// start-up (measured through /proc/self/statm's resident pages).
TEST(AlignedBuffer, LargeBuffersAreNotResidentUntilTouched) {
  auto resident_bytes = [] {
    std::ifstream f("/proc/self/statm");
    size_t total = 0, resident = 0;
    f >> total >> resident;
    return resident * 4096;
  };
  if (resident_bytes() == 0) GTEST_SKIP() << "no /proc/self/statm";
  const size_t before = resident_bytes();
  AlignedBuffer<uint8_t> b(size_t{512} << 20);
  const size_t after = resident_bytes();
  EXPECT_LT(after, before + (size_t{64} << 20)) << "a 512 MiB buffer made " << (after - before)
                                                << " bytes resident before any use";
}

}  // namespace
}  // namespace deepinfer
