// Host side of sample_rows (sampling.h): a row's settings with the CPU sampler's float
// arithmetic (engine/sampler.cc: inv_t = 1.0f / temperature, cut offset std::log(min_p)).
#include <cmath>

#include "deepinfer/kernels/cuda/sampling.h"

namespace deepinfer::cuda {

SampleRow make_sample_row(float temperature, int top_k, float top_p, float min_p, uint64_t seed,
                          uint64_t stream_id, uint64_t step) {
  constexpr float kGreedyEps = 1e-5f;  // engine/sampler.cc's
  SampleRow r;
  r.greedy = temperature < kGreedyEps || top_k == 1;
  r.inv_temperature = r.greedy ? 1.0f : 1.0f / temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.use_min_p = min_p > 0.0f;
  r.log_min_p = r.use_min_p ? std::log(min_p) : 0.0f;
  r.seed = seed;
  r.stream_id = stream_id;
  r.step = step;
  return r;
}

}  // namespace deepinfer::cuda
