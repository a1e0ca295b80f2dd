// Properties of the quantizers gguf.quants cannot check (Q8_1, Q8_K) and input validation.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "deepinfer/base/fp16.h"
#include "deepinfer/tensor/quant.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

// Round trip error of an 8-bit absmax format is at most half a step (amax/127/2) per element,
// plus the fp16 rounding of the scale (relative 2^-11 of amax).
void expect_roundtrip(DType type, int64_t block) {
  const int64_t n = 4 * 256;
  auto x = random_row(n, 7);
  for (int j = 0; j < block; ++j) x[j] = 0;  // a zero block
  std::vector<uint8_t> q(row_bytes(type, n));
  ASSERT_TRUE(quantize_row(type, x.data(), q.data(), n).is_ok());
  std::vector<float> y(n);
  ASSERT_TRUE(dequantize_row(type, q.data(), y.data(), n).is_ok());
  for (int64_t b = 0; b < n / block; ++b) {
    float amax = 0;
    for (int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(x[b * block + j]));
    const float tol = amax / 127 * 0.5f + amax * 2e-3f + 1e-7f;
    for (int64_t j = 0; j < block; ++j)
      ASSERT_NEAR(y[b * block + j], x[b * block + j], tol) << dtype_name(type) << " block " << b;
  }
}

TEST(QuantRoundTrip, Q8_0Q8_1Q8_K) {
  expect_roundtrip(DType::kQ8_0, 32);
  expect_roundtrip(DType::kQ8_1, 32);
  expect_roundtrip(DType::kQ8_K, 256);
}

TEST(QuantRoundTrip, Q8_1SumAndQ8_KBsums) {
  const int64_t n = 512;
  auto x = random_row(n, 11);
  std::vector<BlockQ8_1> b1(n / 32);
  ASSERT_TRUE(quantize_row(DType::kQ8_1, x.data(), b1.data(), n).is_ok());
  for (const auto& b : b1) {
    int sum = 0;
    for (int8_t v : b.qs) sum += v;
    EXPECT_NEAR(f16_to_f32(b.s), f16_to_f32(b.d) * sum, std::fabs(f16_to_f32(b.d) * sum) * 2e-3f + 1e-4f);
  }
  std::vector<BlockQ8_K> bk(n / 256);
  ASSERT_TRUE(quantize_row(DType::kQ8_K, x.data(), bk.data(), n).is_ok());
  for (const auto& b : bk) {
    int amax = 0;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) {
        sum += b.qs[16 * g + l];
        amax = std::max(amax, std::abs(int(b.qs[16 * g + l])));
      }
      EXPECT_EQ(sum, b.bsums[g]);
    }
    EXPECT_EQ(amax, 127);  // the largest magnitude maps to +-127 (ggml: -127/max scale)
  }
}

TEST(QuantRoundTrip, NearestIntRoundsHalfToEven) {
  EXPECT_EQ(quant_detail::nearest_int(2.5f), 2);
  EXPECT_EQ(quant_detail::nearest_int(3.5f), 4);
  EXPECT_EQ(quant_detail::nearest_int(-2.5f), -2);
  EXPECT_EQ(quant_detail::nearest_int(-126.7f), -127);
}

TEST(QuantRoundTrip, BadInputIsAStatus) {
  float x[64] = {};
  uint8_t buf[512];
  EXPECT_EQ(quantize_row(DType::kQ8_0, x, buf, 33).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dequantize_row(DType::kQ4_K, buf, x, 32).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_row(DType::kQ4_K, x, buf, 256).code(), StatusCode::kUnsupported);
  EXPECT_EQ(dequantize_row(DType::kI32, buf, x, 4).code(), StatusCode::kUnsupported);
  EXPECT_EQ(dequantize_row(static_cast<DType>(77), buf, x, 4).code(), StatusCode::kUnsupported);
  EXPECT_FALSE(can_quantize(DType::kQ6_K));
  EXPECT_TRUE(can_dequantize(DType::kQ3_K));
}

}  // namespace
}  // namespace deepinfer
