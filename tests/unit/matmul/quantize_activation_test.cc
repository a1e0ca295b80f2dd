// The AVX-512 Q8_32 activation quantizer must give the scalar one's bytes exactly: the int8
// matmul results, and so batch invariance across the paths that use either, depend on it.
#include "deepinfer/kernels/cpu/quantize_activation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {
namespace {

TEST(QuantizeActQ8_32, Avx512EqualsScalar) {
  if (!cpu_features().has_avx512()) GTEST_SKIP() << "no AVX-512 on this host";
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t n = 32 * 64;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(n);
    const float scale = std::ldexp(1.0f, trial % 40 - 20);
    for (auto& v : x) v = nd(rng) * scale;
    // Ties and edge blocks: exact multiples of half the step (round half away from zero), an
    // all-zero block, a block with one non-zero, signed zeros.
    // Block 0: amax 127 * scale (a power of two), so the step is exactly scale and x / step
    // hits every tie -15.5 .. 14.5.
    x[0] = 127 * scale;
    for (int j = 1; j < 32; ++j) x[j] = (static_cast<float>(j) - 15.5f) * scale;
    x[32] = -127 * scale;
    for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;
    for (int j = 0; j < 32; ++j) x[96 + j] = j == 5 ? -scale : (j % 2 ? -0.0f : 0.0f);
    for (ActSign sign : {ActSign::kSigned, ActSign::kUnsigned}) {
      std::vector<ActBlock32> want(n / 32), got(n / 32);
      std::memset(want.data(), 0x5A, want.size() * sizeof(ActBlock32));
      std::memset(got.data(), 0xA5, got.size() * sizeof(ActBlock32));
      quantize_act_q8_32(x.data(), want.data(), n, sign);
      quantize_act_q8_32_avx512(x.data(), got.data(), n, sign);
      for (int64_t b = 0; b < n / 32; ++b)
        ASSERT_EQ(0, std::memcmp(&want[b], &got[b], sizeof(ActBlock32))) << fmt::format(
            "trial={} block={} unsigned={} scale={}", trial, b, sign == ActSign::kUnsigned, scale);
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
