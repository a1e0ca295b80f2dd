#include "deepinfer/base/memory_info.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(MemoryInfo, ReadsMemAvailableInBytes) {
  EXPECT_EQ(parse_mem_available("MemTotal:       24683620 kB\nMemFree:        22247000 kB\n"
                                "MemAvailable:   24200000 kB\nBuffers:  1 kB\n"),
            size_t{24200000} * 1024);
}

TEST(MemoryInfo, MissingOrMalformedFieldIsNullopt) {
  EXPECT_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
  EXPECT_FALSE(parse_mem_available("MemAvailable: lots\n").has_value());
  EXPECT_FALSE(parse_mem_available("MemAvailable: 12 MB\n").has_value());
  EXPECT_FALSE(parse_mem_available("").has_value());
}

TEST(MemoryInfo, ThisMachineReportsSomething) {
  const auto bytes = available_memory_bytes();
  if (!bytes) GTEST_SKIP() << "no /proc/meminfo";
  EXPECT_GT(*bytes, size_t{0});
}

TEST(MemoryInfo, ParsesSysfsCacheSizes) {
  EXPECT_EQ(parse_cache_size("491520K\n"), size_t{491520} * 1024);
  EXPECT_EQ(parse_cache_size("2M"), size_t{2} << 20);
  EXPECT_EQ(parse_cache_size("512"), size_t{512});
  EXPECT_FALSE(parse_cache_size("").has_value());
  EXPECT_FALSE(parse_cache_size("K").has_value());
  EXPECT_FALSE(parse_cache_size("12 KB").has_value());
  EXPECT_FALSE(parse_cache_size("99999999999999999999K").has_value());
}

TEST(MemoryInfo, LargestCacheIsAtLeastOneLine) {
  const auto bytes = largest_cache_bytes();
  if (!bytes) GTEST_SKIP() << "sysfs gives no cache sizes here";
  EXPECT_GE(*bytes, size_t{64});
}

}  // namespace
}  // namespace deepinfer
