// First pieces of GPU sampling (engine/sampler.cc does the rest on the CPU): greedy argmax over
// rows of logits with the CPU sampler's rules, and the Philox draws the CPU sampler makes, so a
// later device-side sampler can use the same streams. Pointers are device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::cuda {

// tokens[r] = the id of the largest logit of row r: NaN counts as -inf, ties go to the lowest
// id, a row with no finite-or-+inf logit gives -1 (as engine::sample's greedy path).
struct ArgmaxParams {
  const float* logits = nullptr;  // [rows, stride]
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t stride = 0;
  int32_t* tokens = nullptr;  // [rows]
};
void argmax_rows(const ArgmaxParams& p, cudaStream_t stream);

// out[i] = philox_uniform_double(seed[i], stream_id[i], step[i]) of base/philox.h, bitwise.
struct PhiloxParams {
  const uint64_t* seed = nullptr;       // [n]
  const uint64_t* stream_id = nullptr;  // [n]
  const uint64_t* step = nullptr;       // [n]
  int64_t n = 0;
  double* out = nullptr;  // [n]
};
void philox_uniform_double(const PhiloxParams& p, cudaStream_t stream);

}  // namespace deepinfer::cuda
