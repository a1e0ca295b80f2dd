// The scalar reference against float64 "dequantize the weights, dot with the unquantized input".
// kInt8: the gap is the activation quantization error, bounded per output element below.
// kHigh: only fp32 rounding (of the dequantized weights' fma and of the accumulation).
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "matmul_test_util.h"

namespace deepinfer::kernels {
namespace {

// Absmax 8-bit quantization of a block with scale s = amax/127 moves each element by at most
// s/2, so |ref - exact| <= sum_i |w_i| * s(block of i) / 2. On top, fp32 accumulation over n
// terms adds at most ~n * 2^-24 * sum |w_i x_i| (we allow 4x that), plus the fp16 rounding of
// nothing (weights are compared dequantized, activations kept in fp32 scales).
double error_bound(DType t, MatmulPrecision prec, const std::vector<float>& w, const float* x, int64_t n) {
  const bool quantized_act =
      prec == MatmulPrecision::kInt8 && t != DType::kF32 && t != DType::kF16 && t != DType::kBF16;
  const int64_t block = testing::is_k(t) ? 256 : 32;
  double bound = 0, mag = 0;
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    double amax = 0;
    for (int64_t i = b0; i < std::min(n, b0 + block); ++i) amax = std::max(amax, std::fabs(double(x[i])));
    for (int64_t i = b0; i < std::min(n, b0 + block); ++i) {
      if (quantized_act) bound += std::fabs(double(w[i])) * amax / 127 / 2 * (1 + 1e-5);
      mag += std::fabs(double(w[i]) * x[i]);
    }
  }
  return bound + 4.0 * n * std::ldexp(1.0, -24) * mag + 1e-6;
}

void within_error_of_float64(MatmulPrecision prec) {
  const int64_t n_out = 23, n_rows = 3;
  for (DType t : testing::kAllWeightTypes) {
    const int64_t n_in = testing::is_k(t) ? 768 : 256;
    auto w = testing::random_weights(t, n_out, n_in, 8, 12);
    auto x = testing::random_input(n_rows, n_in, 13);
    std::vector<float> out(n_rows * n_out);
    MatmulParams p;
    p.weight = w.bytes.data();
    p.weight_type = t;
    p.n_out = n_out;
    p.n_in = n_in;
    p.weight_row_bytes = w.row_bytes;
    p.input = x.data();
    p.n_rows = n_rows;
    p.input_stride = n_in;
    p.output = out.data();
    p.output_stride = n_out;
    p.precision = prec;
    matmul_reference(p);
    std::vector<float> wrow(n_in);
    double worst = 0;
    for (int64_t o = 0; o < n_out; ++o) {
      ASSERT_TRUE(dequantize_row(t, w.bytes.data() + o * w.row_bytes, wrow.data(), n_in).is_ok());
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x.data() + r * n_in;
        double exact = 0;
        for (int64_t i = 0; i < n_in; ++i) exact += double(wrow[i]) * xr[i];
        const double err = std::fabs(out[r * n_out + o] - exact), bound = error_bound(t, prec, wrow, xr, n_in);
        worst = std::max(worst, err / bound);
        ASSERT_LE(err, bound) << fmt::format("int8={} type={} row={} out={} got={} exact={}",
                                             prec == MatmulPrecision::kInt8, dtype_name(t), r, o,
                                             out[r * n_out + o], exact);
      }
    }
    // The bound must not be vacuous for quantized types: typical error is well inside it,
    // but not orders of magnitude inside (which would mean the activations weren't quantized).
    if (prec == MatmulPrecision::kInt8 && t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
      EXPECT_GT(worst, 1e-3) << dtype_name(t);
    }
  }
}

TEST(MatmulReference, Int8WithinQuantizationErrorOfFloat64) { within_error_of_float64(MatmulPrecision::kInt8); }

TEST(MatmulReference, HighWithinFp32ErrorOfFloat64) { within_error_of_float64(MatmulPrecision::kHigh); }

// kHigh must be far closer to exact than kInt8 on the same data: that is its whole point.
TEST(MatmulReference, HighIsMuchCloserThanInt8) {
  const int64_t n_out = 16, n_in = 512;
  for (DType t : testing::kAllWeightTypes) {
    if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) continue;
    auto w = testing::random_weights(t, n_out, n_in, 0, 21);
    auto x = testing::random_input(1, n_in, 22);
    double err[2] = {0, 0};
    std::vector<float> wrow(n_in);
    for (int k = 0; k < 2; ++k) {
      std::vector<float> out(n_out);
      MatmulParams p;
      p.weight = w.bytes.data(), p.weight_type = t, p.n_out = n_out, p.n_in = n_in;
      p.weight_row_bytes = w.row_bytes, p.input = x.data(), p.n_rows = 1, p.input_stride = n_in;
      p.output = out.data(), p.output_stride = n_out;
      p.precision = k == 0 ? MatmulPrecision::kHigh : MatmulPrecision::kInt8;
      matmul_reference(p);
      for (int64_t o = 0; o < n_out; ++o) {
        ASSERT_TRUE(dequantize_row(t, w.bytes.data() + o * w.row_bytes, wrow.data(), n_in).is_ok());
        double exact = 0;
        for (int64_t i = 0; i < n_in; ++i) exact += double(wrow[i]) * x[i];
        err[k] = std::max(err[k], std::fabs(out[o] - exact));
      }
    }
    EXPECT_LT(err[0] * 50, err[1]) << fmt::format("{}: high err {} vs int8 err {}", dtype_name(t), err[0], err[1]);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
