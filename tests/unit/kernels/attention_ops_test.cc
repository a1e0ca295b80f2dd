// The per-ISA score loops of paged attention: every SIMD variant against the scalar one, and
// the AVX-512 register path for 32/64/128-dim heads bit-identical to its generic path (same
// accumulator chains and add tree), whatever a row's or key's slot in the call.
#include <gtest/gtest.h>

#include <cstring>

#include <fmt/format.h>

#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

constexpr int kRows = 4, kKeys = 23;

// Keys of dimension n, stored as `type`, each followed by `pad` zero elements.
struct Keys {
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  std::vector<const void*> ptr;
  Keys(const std::vector<float>& src, int n, int pad, DType type) {
    const int w = n + pad;
    f32.assign(static_cast<size_t>(kKeys) * w, 0.0f);
    u16.assign(f32.size(), 0);
    for (int j = 0; j < kKeys; ++j)
      for (int d = 0; d < n; ++d) {
        const float x = src[j * n + d];
        f32[j * w + d] = x;
        u16[j * w + d] = type == DType::kF16 ? f32_to_f16(x) : f32_to_bf16(x);
      }
    for (int j = 0; j < kKeys; ++j)
      ptr.push_back(type == DType::kF32 ? static_cast<const void*>(f32.data() + j * w) : u16.data() + j * w);
  }
};

using Ops = detail::AttentionOps;

std::vector<float> scores(const Ops& ops, const std::vector<float>& q, int qw, const Keys& k, int n) {
  std::vector<float> out(kRows * kKeys, NAN);
  const float* qs[kRows];
  float* outs[kRows];
  for (int r = 0; r < kRows; ++r) {
    qs[r] = q.data() + r * qw;
    outs[r] = out.data() + r * kKeys;
  }
  ops.qk_rows(qs, kRows, k.ptr.data(), kKeys, n, 0.125f, outs);
  return out;
}

TEST(AttentionOps, ScoresMatchScalarAndRegisterPathKeepsBits) {
  std::mt19937 rng(3);
  for (int n : {32, 64, 128}) {
    for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
      const auto qv = testing::random_vec(kRows * n, rng), kv = testing::random_vec(kKeys * n, rng, -2.0f, 2.0f);
      const Keys keys(kv, n, 0, type), padded_keys(kv, n, 16, type);
      std::vector<float> padded_q(kRows * (n + 16), 0.0f);
      for (int r = 0; r < kRows; ++r) std::copy(qv.begin() + r * n, qv.begin() + (r + 1) * n, padded_q.begin() + r * (n + 16));
      const auto ref = scores(detail::attention_ops_scalar(type), qv, n, keys, n);
      for (IsaLevel isa : testing::simd_levels()) {
        const Ops ops = isa == IsaLevel::kAvx512 ? detail::attention_ops_avx512(type) : detail::attention_ops_avx2(type);
        const std::string what = fmt::format("isa={} n={} kv={}", isa_name(isa), n, dtype_name(type));
        const auto got = scores(ops, qv, n, keys, n);
        EXPECT_LT(testing::max_norm_err(got.data(), ref.data(), got.size()), 1e-5) << what;
        // n + 16 zero-padded dims take the generic loop: zero products leave every chain as is.
        const auto generic = scores(ops, padded_q, n + 16, padded_keys, n + 16);
        EXPECT_EQ(0, std::memcmp(got.data(), generic.data(), got.size() * 4)) << what;
        // Row 2 alone, against the keys from the second on: same bits in other slots.
        std::vector<float> one(kKeys - 1, NAN);
        const float* q2 = qv.data() + 2 * n;
        float* o = one.data();
        ops.qk_rows(&q2, 1, keys.ptr.data() + 1, kKeys - 1, n, 0.125f, &o);
        EXPECT_EQ(0, std::memcmp(one.data(), got.data() + 2 * kKeys + 1, one.size() * 4)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
