// Philox4x32-10 on the device, bitwise as base/philox.h (Salmon et al., SC'11): the draws of
// the CPU sampler, so a seed gives the same uniform on both.
#pragma once

#include <cstdint>

namespace deepinfer::cuda::detail {

__device__ __forceinline__ void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    const uint32_t c0 = static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0,
                   c1 = static_cast<uint32_t>(p1);
    const uint32_t c2 = static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1,
                   c3 = static_cast<uint32_t>(p0);
    ctr[0] = c0;
    ctr[1] = c1;
    ctr[2] = c2;
    ctr[3] = c3;
  }
}

// philox_uniform_double(seed, stream, step) of base/philox.h.
__device__ __forceinline__ double philox_uniform_double(uint64_t seed, uint64_t stream,
                                                        uint64_t step) {
  uint32_t w[4] = {static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                   static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  philox4x32_10(w, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(w[0]) << 21) ^ (w[1] >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

}  // namespace deepinfer::cuda::detail
