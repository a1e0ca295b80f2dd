// Element-wise kernels, RMSNorm and softmax: every SIMD variant against the scalar reference.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/rms_norm.h"
#include "deepinfer/kernels/cpu/softmax.h"
#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

using testing::max_rel_err;
using testing::random_vec;
using testing::simd_levels;

const int64_t kSizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 127, 255, 1000, 4099};

TEST(Elementwise, UnaryAndBinaryMatchReference) {
  std::mt19937 rng(1);
  for (IsaLevel isa : simd_levels()) {
    for (int64_t n : kSizes) {
      auto a = random_vec(n, rng, -12.0f, 12.0f), b = random_vec(n, rng, -3.0f, 3.0f);
      std::vector<float> ref(n), got(n, -7.0f);
      auto check = [&](const char* op, double tol) {
        EXPECT_LT(max_rel_err(got.data(), ref.data(), n, 1e-4), tol)
            << op << " isa=" << isa_name(isa) << " n=" << n;
      };
      add_reference(a.data(), b.data(), ref.data(), n);
      add_with_isa(a.data(), b.data(), got.data(), n, isa);
      check("add", 1e-7);
      silu_reference(a.data(), ref.data(), n);
      silu_with_isa(a.data(), got.data(), n, isa);
      check("silu", 2e-6);
      gelu_reference(a.data(), ref.data(), n);
      gelu_with_isa(a.data(), got.data(), n, isa);
      check("gelu", 2e-6);
      swiglu_reference(a.data(), b.data(), ref.data(), n);
      swiglu_with_isa(a.data(), b.data(), got.data(), n, isa);
      check("swiglu", 2e-6);
      geglu_reference(a.data(), b.data(), ref.data(), n);
      geglu_with_isa(a.data(), b.data(), got.data(), n, isa);
      check("geglu", 2e-6);
      // In place must give the same answer.
      std::vector<float> inplace = a;
      silu_with_isa(inplace.data(), inplace.data(), n, isa);
      silu_reference(a.data(), ref.data(), n);
      EXPECT_LT(max_rel_err(inplace.data(), ref.data(), n, 1e-4), 2e-6) << "silu in place n=" << n;
    }
  }
}

TEST(Elementwise, ExtremeInputsStayFinite) {
  std::vector<float> x = {-1000.0f, -90.0f, -88.0f, -50.0f, 0.0f, 50.0f, 88.0f, 90.0f, 1000.0f};
  std::vector<float> ref(x.size()), got(x.size());
  for (IsaLevel isa : simd_levels()) {
    silu_reference(x.data(), ref.data(), x.size());
    silu_with_isa(x.data(), got.data(), x.size(), isa);
    EXPECT_LT(max_rel_err(got.data(), ref.data(), x.size(), 1e-4), 2e-6) << isa_name(isa);
    gelu_reference(x.data(), ref.data(), x.size());
    gelu_with_isa(x.data(), got.data(), x.size(), isa);
    EXPECT_LT(max_rel_err(got.data(), ref.data(), x.size(), 1e-4), 2e-6) << isa_name(isa);
  }
}

TEST(RmsNorm, MatchesReferenceAndIsBatchInvariant) {
  std::mt19937 rng(2);
  for (IsaLevel isa : simd_levels()) {
    for (int64_t dim : kSizes) {
      for (int64_t rows : {1, 3, 8}) {
        const int64_t stride = dim + 5;
        auto x = random_vec(rows * stride, rng, -4.0f, 4.0f);
        auto w = random_vec(dim, rng, 0.5f, 1.5f);
        for (bool with_w : {true, false}) {
          std::vector<float> ref(rows * dim), got(rows * dim);
          RmsNormParams p{x.data(), with_w ? w.data() : nullptr, ref.data(), rows, dim, stride, dim, 1e-5f};
          rms_norm_reference(p);
          p.y = got.data();
          rms_norm_with_isa(p, isa);
          EXPECT_LT(max_rel_err(got.data(), ref.data(), got.size(), 1e-4), 1e-5)
              << "isa=" << isa_name(isa) << " dim=" << dim << " rows=" << rows << " w=" << with_w;
          // Last row alone must be bitwise equal to its value in the batch.
          std::vector<float> alone(dim);
          RmsNormParams q = p;
          q.x = x.data() + (rows - 1) * stride;
          q.y = alone.data();
          q.rows = 1;
          rms_norm_with_isa(q, isa);
          EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + (rows - 1) * dim, dim * 4));
          // In place.
          std::vector<float> xin = x;
          RmsNormParams r = p;
          r.x = r.y = xin.data();
          r.y_stride = stride;
          rms_norm_with_isa(r, isa);
          for (int64_t i = 0; i < rows; ++i)
            EXPECT_EQ(0, std::memcmp(xin.data() + i * stride, got.data() + i * dim, dim * 4));
        }
      }
    }
  }
}

TEST(Softmax, MatchesReferenceWithScaleAndMasks) {
  std::mt19937 rng(3);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (IsaLevel isa : simd_levels()) {
    for (int64_t n : kSizes) {
      for (float scale : {1.0f, 0.5f, 2.0f}) {
        auto x = random_vec(n, rng, -20.0f, 20.0f);
        if (n > 2) x[n / 2] = ninf;
        std::vector<float> ref(n), got(n);
        softmax_reference(x.data(), ref.data(), n, scale);
        softmax_with_isa(x.data(), got.data(), n, scale, isa);
        EXPECT_LT(max_rel_err(got.data(), ref.data(), n, 1e-7), 1e-5)
            << "isa=" << isa_name(isa) << " n=" << n << " scale=" << scale;
        double sum = 0;
        for (float v : got) sum += v;
        EXPECT_NEAR(sum, 1.0, 1e-5);
        if (n > 2) {
          EXPECT_EQ(got[n / 2], 0.0f);
        }
      }
    }
    std::vector<float> all(13, ninf), out(13, 5.0f);
    softmax_with_isa(all.data(), out.data(), 13, 1.0f, isa);
    for (float v : out) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace deepinfer::kernels
