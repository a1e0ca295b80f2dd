// The SIMD dequantizers and the embedding lookup must equal the scalar dequantize_row bitwise.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/dequantize.h"
#include "deepinfer/kernels/cpu/embedding.h"
#include "deepinfer/tensor/quant.h"

namespace deepinfer {
namespace {

std::vector<uint8_t> random_row(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> q(row_bytes(t, n));
  if (can_quantize(t)) {
    EXPECT_TRUE(quantize_row(t, x.data(), q.data(), n).is_ok());
  } else {  // K formats: random bytes with small finite fp16 scales in every field
    for (auto& b : q) b = static_cast<uint8_t>(rng() & 0x3b);
  }
  return q;
}

TEST(DequantizeFast, BitIdenticalToScalarForEveryTypeAndIsa) {
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                         DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ8_1, DType::kQ4_K,
                         DType::kQ5_K, DType::kQ6_K, DType::kQ2_K, DType::kQ3_K, DType::kQ8_K};
  for (DType t : types) {
    const int64_t n = dtype_info(t)->block_elems == 1 ? 77 : 512;
    auto q = random_row(t, n, 3);
    std::vector<float> want(n), got(n);
    ASSERT_TRUE(dequantize_row(t, q.data(), want.data(), n).is_ok());
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
      std::fill(got.begin(), got.end(), 0.f);
      ASSERT_TRUE(kernels::dequantize_row_with_isa(t, q.data(), got.data(), n, isa).is_ok());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * 4)) << dtype_name(t) << " " << isa_name(isa);
    }
  }
  float out[32];
  EXPECT_FALSE(kernels::dequantize_row_fast(DType::kQ8_0, nullptr, out, 31).is_ok());
}

TEST(Embedding, GathersDequantizedRows) {
  const int64_t vocab = 9, dim = 64;
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_1, DType::kQ6_K}) {
    const int64_t d = t == DType::kQ6_K ? 256 : dim;
    const size_t rb = row_bytes(t, d) + 4;  // padded rows
    std::vector<uint8_t> table(rb * vocab);
    for (int64_t v = 0; v < vocab; ++v) {
      auto row = random_row(t, d, 100 + v);
      std::memcpy(table.data() + v * rb, row.data(), row.size());
    }
    const int32_t ids[] = {3, 0, 8, 3};
    std::vector<float> out(4 * d), want(d);
    kernels::embedding_lookup(table.data(), t, rb, d, ids, 4, out.data());
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(dequantize_row(t, table.data() + ids[k] * rb, want.data(), d).is_ok());
      EXPECT_EQ(0, std::memcmp(out.data() + k * d, want.data(), d * 4)) << dtype_name(t) << " id " << ids[k];
    }
  }
  const int32_t bad[] = {1, 9};
  EXPECT_EQ(kernels::check_token_ids(bad, 2, 9).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(kernels::check_token_ids(bad, 1, 9).is_ok());
}

}  // namespace
}  // namespace deepinfer
