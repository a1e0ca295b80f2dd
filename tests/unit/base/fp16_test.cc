#include "deepinfer/base/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deepinfer {
namespace {

TEST(Fp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);       // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);       // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                 // overflows to inf
  EXPECT_EQ(f32_to_f16(5.9604645e-08f), 0x0001);           // smallest subnormal
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
}

}  // namespace
}  // namespace deepinfer
