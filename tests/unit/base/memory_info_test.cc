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

}  // namespace
}  // namespace deepinfer
