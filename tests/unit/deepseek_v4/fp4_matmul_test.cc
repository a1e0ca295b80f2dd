// FP4 e2m1 matmul with ue8m0 scales per 32 inputs: conversions against known values, and the
// AVX2 and AVX-512 variants and the scalar reference against a double-precision
// dequantize-then-multiply over many shapes (partial 32-blocks, 1..9 rows, padded strides).
#include "deepinfer/kernels/cpu/fp4_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

using kernels::fp4_e2m1_from_float;
using kernels::fp4_e2m1_to_float;
using kernels::ue8m0_to_float;

TEST(Fp4, KnownValues) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int v = 0; v < 8; ++v) {
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(v)), mags[v]) << v;
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(v | 8)), -mags[v]) << v;
    // The high nibble is ignored: callers pass byte & 0xf or byte >> 4.
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(0xf0 | v)), mags[v]) << v;
  }
  for (int v = 0; v < 16; ++v) {
    if (v == 8) continue;  // -0 encodes as +0
    EXPECT_EQ(fp4_e2m1_from_float(fp4_e2m1_to_float(static_cast<uint8_t>(v))), v) << v;
  }
  EXPECT_EQ(fp4_e2m1_from_float(100.0f), 7);    // saturates at 6
  EXPECT_EQ(fp4_e2m1_from_float(-100.0f), 15);  // and -6
  EXPECT_EQ(fp4_e2m1_from_float(2.5f), 4);      // tie between 2 (code 4) and 3 (code 5): even
  EXPECT_EQ(fp4_e2m1_from_float(0.25f), 0);     // tie between 0 and 0.5: even
  EXPECT_EQ(fp4_e2m1_from_float(5.1f), 7);
  EXPECT_EQ(ue8m0_to_float(127), 1.0f);
  EXPECT_EQ(ue8m0_to_float(130), 8.0f);
  EXPECT_EQ(ue8m0_to_float(120), std::ldexp(1.0f, -7));
  EXPECT_EQ(ue8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(ue8m0_to_float(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(ue8m0_to_float(255)));
}

struct Case {
  int64_t n_out, n_in, rows;
  int64_t pad;  // extra bytes / floats on every row of weights, scales, input and output
};

TEST(Fp4Matmul, VariantsMatchDequantizedReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), exponent(117, 135);
  ThreadPool pool(2);
  for (Case c : {Case{1, 32, 1, 0}, Case{130, 200, 3, 0}, Case{64, 256, 5, 3}, Case{7, 34, 9, 1},
                 Case{33, 2, 4, 0}, Case{17, 96, 1, 0}, Case{40, 4096, 2, 0}, Case{9, 62, 7, 5}}) {
    const int64_t nb = (c.n_in + 31) / 32;
    const int64_t wrow = c.n_in / 2 + c.pad, srow = nb + c.pad, xrow = c.n_in + c.pad,
                  orow = c.n_out + c.pad;
    std::vector<uint8_t> w(c.n_out * wrow), scale(c.n_out * srow);
    for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
    for (auto& v : scale) v = static_cast<uint8_t>(exponent(rng));
    std::vector<float> x(c.rows * xrow);
    for (auto& v : x) v = normal(rng);
    auto term = [&](int64_t r, int64_t o, int64_t i) {
      const uint8_t b = w[o * wrow + i / 2];
      return double(x[r * xrow + i]) * fp4_e2m1_to_float(i % 2 ? b >> 4 : b & 0xf) *
             ue8m0_to_float(scale[o * srow + i / 32]);
    };
    kernels::Fp4MatmulParams p;
    p.weight = w.data();
    p.weight_row_bytes = wrow;
    p.scale = scale.data();
    p.scale_stride = srow;
    p.n_out = c.n_out;
    p.n_in = c.n_in;
    p.input = x.data();
    p.n_rows = c.rows;
    p.input_stride = xrow;
    p.output_stride = orow;
    std::vector<float> got(c.rows * orow);
    p.output = got.data();
    ASSERT_TRUE(kernels::fp4_matmul_check(p).is_ok());
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
      if (isa > best_isa()) continue;
      std::fill(got.begin(), got.end(), -1.0f);
      kernels::fp4_matmul_with_isa(p, pool, isa);
      // Normalized error against the size of the summed terms (f32 rounding of a <= 4096-term
      // dot product stays well below 1e-5 of it); padding must stay untouched.
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t o = 0; o < c.n_out; ++o) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < c.n_in; ++i) {
            want += term(r, o, i);
            mag += std::fabs(term(r, o, i));
          }
          EXPECT_LE(std::fabs(got[r * orow + o] - want), 1e-5 * mag + 1e-30)
              << "isa " << isa_name(isa) << " n_out " << c.n_out << " n_in " << c.n_in << " rows "
              << c.rows << " at (" << r << ", " << o << ")";
        }
        for (int64_t o = c.n_out; o < orow; ++o) EXPECT_EQ(got[r * orow + o], -1.0f);
      }
    }
  }
}

// A row's output is bit-identical whatever else shares the call (rows before and after it,
// the thread split, which tile of output rows it lands in): batch invariance.
TEST(Fp4Matmul, RowsDoNotDependOnTheBatch) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), exponent(120, 132);
  const int64_t n_out = 37, n_in = 200, rows = 11, nb = (n_in + 31) / 32;
  std::vector<uint8_t> w(n_out * n_in / 2), scale(n_out * nb);
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : scale) v = static_cast<uint8_t>(exponent(rng));
  std::vector<float> x(rows * n_in);
  for (auto& v : x) v = normal(rng);
  auto run = [&](int64_t r0, int64_t n, IsaLevel isa, int threads) {
    kernels::Fp4MatmulParams p;
    p.weight = w.data();
    p.weight_row_bytes = n_in / 2;
    p.scale = scale.data();
    p.scale_stride = nb;
    p.n_out = n_out;
    p.n_in = n_in;
    p.input = x.data() + r0 * n_in;
    p.n_rows = n;
    p.input_stride = n_in;
    p.output_stride = n_out;
    std::vector<float> out(n * n_out);
    p.output = out.data();
    ThreadPool pool(threads);
    kernels::fp4_matmul_with_isa(p, pool, isa);
    return out;
  };
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (isa > best_isa()) continue;
    const std::vector<float> all = run(0, rows, isa, 1);
    for (int threads : {1, 3})
      for (int64_t r0 = 0; r0 < rows; ++r0)
        for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}}) {
          if (r0 + n > rows) continue;
          const std::vector<float> part = run(r0, n, isa, threads);
          for (int64_t r = 0; r < n; ++r)
            for (int64_t o = 0; o < n_out; ++o)
              ASSERT_EQ(part[r * n_out + o], all[(r0 + r) * n_out + o])
                  << "isa " << isa_name(isa) << " rows [" << r0 << ", " << r0 + n << ") threads "
                  << threads << " at (" << r << ", " << o << ")";
        }
  }
}

TEST(Fp4Matmul, CheckRefusesBadShapes) {
  uint8_t w[16] = {}, s[1] = {127};
  float x[32] = {}, out[1] = {};
  kernels::Fp4MatmulParams p;
  p.weight = w;
  p.weight_row_bytes = 16;
  p.scale = s;
  p.scale_stride = 1;
  p.n_out = 1;
  p.n_in = 32;
  p.input = x;
  p.n_rows = 1;
  p.input_stride = 32;
  p.output = out;
  p.output_stride = 1;
  EXPECT_TRUE(kernels::fp4_matmul_check(p).is_ok());
  p.n_in = 31;  // odd: half a byte
  EXPECT_FALSE(kernels::fp4_matmul_check(p).is_ok());
  p.n_in = 34;  // needs 2 scales and 17 bytes a row
  EXPECT_FALSE(kernels::fp4_matmul_check(p).is_ok());
}

}  // namespace
}  // namespace deepinfer
