// Philox4x32-10 against Random123's published known-answer vectors, and the uniform helpers.
#include "deepinfer/base/philox.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(Philox, Random123KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsInRangeAndDependsOnEveryInput) {
  double sum = 0;
  for (uint64_t s = 0; s < 20000; ++s) {
    const float u = philox_uniform(7, 3, s);
    const double d = philox_uniform_double(7, 3, s);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    sum += d;
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
  EXPECT_EQ(philox_uniform(1, 2, 3), philox_uniform(1, 2, 3));
  EXPECT_NE(philox_uniform_double(1, 2, 3), philox_uniform_double(2, 2, 3));
  EXPECT_NE(philox_uniform_double(1, 2, 3), philox_uniform_double(1, 3, 3));
  EXPECT_NE(philox_uniform_double(1, 2, 3), philox_uniform_double(1, 2, 4));
  EXPECT_NE(philox_uniform_double(1, 2, 3), philox_uniform_double(1, 2, 3 + (uint64_t{1} << 32)));
}

}  // namespace
}  // namespace deepinfer
