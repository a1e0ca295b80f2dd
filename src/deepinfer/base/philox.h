// Philox4x32-10 counter-based random numbers (Salmon et al., SC'11; the Random123 reference):
// a draw is a pure function of (key, counter), so sampling never depends on shared RNG state,
// on other requests or on the order requests are processed.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// The four words for draw `step` of stream `stream` under `seed`: key = seed, counter =
// (step, stream) as little-endian 32-bit halves.
inline std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t stream, uint64_t step) {
  return philox4x32_10({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// Uniform float in [0, 1) with 24 random bits.
inline float philox_uniform(uint64_t seed, uint64_t stream, uint64_t step) {
  return static_cast<float>(philox_block(seed, stream, step)[0] >> 8) * 0x1.0p-24f;
}

// Uniform double in [0, 1) with 53 random bits (finer resolution for large vocabularies).
inline double philox_uniform_double(uint64_t seed, uint64_t stream, uint64_t step) {
  const auto w = philox_block(seed, stream, step);
  const uint64_t bits = (static_cast<uint64_t>(w[0]) << 21) ^ (w[1] >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

}  // namespace deepinfer
