// FP8 e4m3 block-scaled matmul: conversions against known values, and the AVX2 and AVX-512 variants and
// the scalar reference against a double-precision dequantize-then-multiply over many shapes
// (partial blocks in both directions, 1..9 rows), for DeepSeek-V3/V4's 128x128 blocks and
// V4.1's 32x32 blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "deepinfer/kernels/cpu/fp8_matmul.h"

namespace deepinfer {
namespace {

using kernels::fp8_e4m3_from_float;
using kernels::fp8_e4m3_to_float;

TEST(Fp8, KnownValues) {
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0x3c), 1.5f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f || v == 0x80) continue;
    EXPECT_EQ(fp8_e4m3_from_float(fp8_e4m3_to_float(static_cast<uint8_t>(v))), v) << v;
  }
  EXPECT_EQ(fp8_e4m3_from_float(1000.0f), 0x7e);  // saturates
}

struct Case {
  int64_t n_out, n_in, rows;
  int block = 128;
};

TEST(Fp8Matmul, VariantsMatchDequantizedReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  ThreadPool pool(2);
  for (Case c : {Case{1, 16, 1}, Case{130, 200, 3}, Case{256, 384, 5}, Case{7, 129, 9}, Case{129, 17, 4},
                 Case{64, 128, 1}, Case{1, 16, 1, 32}, Case{48, 32, 2, 32}, Case{130, 200, 3, 32},
                 Case{96, 80, 5, 32}, Case{7, 129, 9, 32}, Case{33, 17, 4, 32}}) {
    const int block = c.block;
    const int64_t bo = (c.n_out + block - 1) / block, bi = (c.n_in + block - 1) / block;
    std::vector<uint8_t> w(c.n_out * c.n_in);
    for (auto& v : w) {
      v = static_cast<uint8_t>(byte(rng));
      if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaNs
    }
    std::vector<float> scale(bo * bi), x(c.rows * c.n_in);
    for (auto& s : scale) s = std::exp2(normal(rng)) * 1e-3f;
    for (auto& v : x) v = normal(rng);
    std::vector<double> want(c.rows * c.n_out);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t o = 0; o < c.n_out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < c.n_in; ++i)
          acc += double(x[r * c.n_in + i]) * fp8_e4m3_to_float(w[o * c.n_in + i]) *
                 scale[(o / block) * bi + i / block];
        want[r * c.n_out + o] = acc;
      }
    kernels::Fp8MatmulParams p;
    p.weight = w.data();
    p.weight_row_bytes = c.n_in;
    p.scale_inv = scale.data();
    p.scale_stride = bi;
    p.block = block;
    p.n_out = c.n_out;
    p.n_in = c.n_in;
    p.input = x.data();
    p.n_rows = c.rows;
    p.input_stride = c.n_in;
    p.output_stride = c.n_out;
    std::vector<float> got(c.rows * c.n_out);
    p.output = got.data();
    ASSERT_TRUE(kernels::fp8_matmul_check(p).is_ok());
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
      if (isa > best_isa()) continue;
      std::fill(got.begin(), got.end(), -1.0f);
      kernels::fp8_matmul_with_isa(p, pool, isa);
      // Normalized error: |got - want| against the size of the terms summed (f32 rounding of a
      // <= 384-term dot product stays far below 1e-5 of that).
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t o = 0; o < c.n_out; ++o) {
          double mag = 0;
          for (int64_t i = 0; i < c.n_in; ++i)
            mag += std::fabs(double(x[r * c.n_in + i]) * fp8_e4m3_to_float(w[o * c.n_in + i]) *
                             scale[(o / block) * bi + i / block]);
          EXPECT_LE(std::fabs(got[r * c.n_out + o] - want[r * c.n_out + o]), 1e-5 * mag + 1e-30)
              << "isa " << isa_name(isa) << " block " << block << " n_out " << c.n_out << " n_in " << c.n_in << " rows " << c.rows
              << " at (" << r << ", " << o << ")";
        }
    }
  }
}

}  // namespace
}  // namespace deepinfer
