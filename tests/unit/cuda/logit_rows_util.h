// Logit rows for the device-sampler tests (sample_rows on a GPU and emulated on the host): the
// shapes a sampler must get right, from the same seeded generator.
#pragma once

#include <cstdint>
#include <limits>
#include <random>

namespace deepinfer::cuda {

// pattern 0: smooth; 1: peaked; 2: integer ties; 3 (and above): half masked with -inf, a few NaNs.
inline void fill_row(float* x, int64_t vocab, int pattern, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < vocab; ++i) {
    switch (pattern) {
      case 0:
        x[i] = nd(rng);
        break;
      case 1:
        x[i] = 8.0f * nd(rng);
        break;
      case 2:
        x[i] = static_cast<float>(static_cast<int>(rng() % 5));
        break;  // many ties
      default:
        x[i] = rng() % 2 ? -std::numeric_limits<float>::infinity() : 2.0f * nd(rng);
        if (rng() % 97 == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
    }
  }
}

}  // namespace deepinfer::cuda
