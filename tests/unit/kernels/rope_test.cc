// RoPE: both layouts against the direct formula, SIMD against the reference, the GGUF
// permutation identity, and the frequency scalings against values from Hugging Face
// transformers 5.24 (modeling_rope_utils, rot_dim 32, theta 1e4).
#include <gtest/gtest.h>

#include <cmath>

#include "deepinfer/kernels/cpu/rope.h"
#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

RopeParams make(std::vector<float>& x, const std::vector<int32_t>& pos, int heads, int hd, int rot, RopeLayout layout) {
  const int64_t stride = int64_t{heads} * hd + 3;
  x.resize(pos.size() * stride);
  return {x.data(), static_cast<int64_t>(pos.size()), heads, hd, rot, stride, pos.data(), 10000.0f, layout, {}};
}

TEST(Rope, BothLayoutsMatchTheDirectFormula) {
  std::mt19937 rng(7);
  const std::vector<int32_t> pos = {0, 1, 5, 100, 4095, 32767};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    for (auto [hd, rot] : {std::pair{64, 64}, {40, 24}, {18, 18}}) {
      std::vector<float> x;
      RopeParams p = make(x, pos, 3, hd, rot, layout);
      x = testing::random_vec(x.size(), rng);
      p.x = x.data();
      const std::vector<float> orig = x;
      rope_reference(p);
      for (size_t t = 0; t < pos.size(); ++t) {
        for (int h = 0; h < 3; ++h) {
          const float* o = orig.data() + t * p.token_stride + h * hd;
          const float* y = x.data() + t * p.token_stride + h * hd;
          for (int i = 0; i < rot / 2; ++i) {
            const double ang = pos[t] * std::pow(10000.0, -2.0 * i / rot);
            const int a = layout == RopeLayout::kHalf ? i : 2 * i, b = layout == RopeLayout::kHalf ? i + rot / 2 : 2 * i + 1;
            EXPECT_NEAR(y[a], o[a] * std::cos(ang) - o[b] * std::sin(ang), 1e-6);
            EXPECT_NEAR(y[b], o[b] * std::cos(ang) + o[a] * std::sin(ang), 1e-6);
          }
          for (int i = rot; i < hd; ++i) EXPECT_EQ(y[i], o[i]) << "pass-through dim " << i;
        }
      }
    }
  }
}

TEST(Rope, SimdMatchesReference) {
  std::mt19937 rng(8);
  std::vector<int32_t> pos(9);
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i * 997 % 5000);
  RopeScaling yarn{RopeScalingType::kYarn, 16.0f, 1.0f, 4.0f, 256, 32.0f, 1.0f, 1.0f, 0.0f, 0.0f};
  for (IsaLevel isa : testing::simd_levels()) {
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
      for (auto [hd, rot] : {std::pair{128, 128}, {64, 32}, {80, 80}, {6, 6}, {34, 34}, {192, 64}}) {
        for (bool scaled : {false, true}) {
          std::vector<float> x;
          RopeParams p = make(x, pos, 5, hd, rot, layout);
          if (scaled) p.scaling = yarn;
          x = testing::random_vec(x.size(), rng, -3.0f, 3.0f);
          p.x = x.data();
          std::vector<float> ref = x;
          RopeParams pr = p;
          pr.x = ref.data();
          rope_reference(pr);
          rope_with_isa(p, isa);
          EXPECT_LT(testing::max_norm_err(x.data(), ref.data(), x.size()), 1e-6)
              << "isa=" << isa_name(isa) << " layout=" << static_cast<int>(layout) << " hd=" << hd << " rot=" << rot
              << " yarn=" << scaled;
        }
      }
    }
  }
}

// The AVX2 scalar tails (rotations not a multiple of 8 lanes) do the lanes' FMAs explicitly, so
// AVX2 and AVX-512 (masked, all lanes) give the same bits; with GCC left to contract the tail
// itself they did not (DeepSeek-V3 fixtures with qk_rope_head_dim 8).
TEST(Rope, Avx2TailsEqualAvx512Bitwise) {
  if (!cpu_features().has_avx2() || !cpu_features().has_avx512()) GTEST_SKIP() << "needs AVX2 and AVX-512";
  std::mt19937 rng(9);
  std::vector<int32_t> pos = {0, 1, 17, 4095};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    for (auto [hd, rot] : {std::pair{8, 8}, {6, 6}, {34, 34}, {24, 8}, {44, 44}}) {
      std::vector<float> x;
      RopeParams p = make(x, pos, 3, hd, rot, layout);
      x = testing::random_vec(x.size(), rng, -3.0f, 3.0f);
      std::vector<float> y = x;
      p.x = x.data();
      rope_with_isa(p, IsaLevel::kAvx2);
      p.x = y.data();
      rope_with_isa(p, IsaLevel::kAvx512);
      EXPECT_EQ(x, y) << "layout=" << static_cast<int>(layout) << " hd=" << hd << " rot=" << rot;
    }
  }
}

// convert_hf_to_gguf permutes each Q/K head so that row 2i + j holds HF row j * hd/2 + i;
// interleaved RoPE on the permuted vector must equal half-layout RoPE on the original.
TEST(Rope, InterleavedOnPermutedEqualsHalfOnOriginal) {
  std::mt19937 rng(9);
  const int hd = 64, heads = 2;
  const std::vector<int32_t> pos = {3, 77, 1000};
  std::vector<float> q, qp;
  RopeParams p = make(q, pos, heads, hd, hd, RopeLayout::kHalf);
  RopeParams pp = make(qp, pos, heads, hd, hd, RopeLayout::kInterleaved);
  q = testing::random_vec(q.size(), rng);  // p.x / pp.x are set again below
  auto permute = [&](const std::vector<float>& src, std::vector<float>& dst) {
    for (size_t t = 0; t < pos.size(); ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hd / 2; ++i)
          for (int j = 0; j < 2; ++j)
            dst[t * p.token_stride + h * hd + 2 * i + j] = src[t * p.token_stride + h * hd + j * hd / 2 + i];
  };
  qp.assign(q.size(), 0.0f);
  permute(q, qp);
  p.x = q.data();
  pp.x = qp.data();
  rope(p);
  rope(pp);
  std::vector<float> expect(q.size(), 0.0f);
  permute(q, expect);
  EXPECT_LT(testing::max_norm_err(qp.data(), expect.data(), qp.size()), 1e-6);
}

TEST(Rope, ScalingsMatchHuggingFace) {
  auto check = [](const RopeScaling& s, const std::vector<double>& hf, const char* what) {
    std::vector<double> got(16);
    rope_inv_freq(s, 10000.0f, 32, got.data());
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(got[i] / hf[i], 1.0, 2e-6) << what << " i=" << i;
  };
  RopeScaling l3{RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 256};
  check(l3, {1, 0.562341332, 0.316227764, 0.177827939, 0.100000001, 0.0282067824, 0.00661310693, 0.00222284929,
             0.00124999997, 0.000702926656, 0.000395284733, 0.000222284929, 0.000125000006, 7.02926627e-05,
             3.95284733e-05, 2.22284925e-05}, "llama3");
  EXPECT_EQ(rope_cos_sin_scale(l3), 1.0f);
  RopeScaling yarn{RopeScalingType::kYarn, 16.0f, 1.0f, 4.0f, 256, 32.0f, 1.0f, 1.0f, 0.0f, 0.0f};
  check(yarn, {1, 0.487027764, 0.231523916, 0.106379203, 0.0464285687, 0.0185773447, 0.00621161703, 0.00111142464,
               0.000624999986, 0.000351463328, 0.000197642366, 0.000111142464, 6.2500003e-05, 3.51463314e-05,
               1.97642366e-05, 1.11142463e-05}, "yarn");
  EXPECT_NEAR(rope_cos_sin_scale(yarn), 1.2772588722239782, 1e-6);
  EXPECT_EQ(rope_attention_scale_multiplier(yarn), 1.0f);
  RopeScaling ds{RopeScalingType::kYarn, 40.0f, 1.0f, 4.0f, 256, 32.0f, 1.0f, 1.0f, 0.707f, 0.0f};
  check(ds, {1, 0.484015197, 0.22813575, 0.103521258, 0.0442857109, 0.0170710739, 0.00519517064, 0.000444569858,
             0.000250000012, 0.000140585325, 7.90569466e-05, 4.44569851e-05, 2.49999994e-05, 1.40585325e-05,
             7.90569447e-06, 4.44569832e-06}, "yarn deepseek");
  EXPECT_NEAR(rope_cos_sin_scale(ds), 1.0857263992561355, 1e-6);
  const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(rope_attention_scale_multiplier(ds), m * m, 1e-6);
  // Linear scaling is position / factor.
  RopeScaling lin{RopeScalingType::kLinear, 4.0f};
  std::vector<double> got(16), base(16);
  rope_inv_freq(lin, 10000.0f, 32, got.data());
  rope_inv_freq({}, 10000.0f, 32, base.data());
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(got[i], base[i] / 4, 1e-12);
}

}  // namespace
}  // namespace deepinfer::kernels
