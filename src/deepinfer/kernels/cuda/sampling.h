// GPU sampling with engine/sampler.cc's rules: greedy argmax over rows of logits, the Philox
// draws the CPU sampler makes, and the whole temperature / top-k / top-p / min-p / draw step
// (sample_rows). Logit bias, penalties and grammar masks stay with the caller (applied to the
// logits first). Pointers are device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
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

// One row's settings for sample_rows. make_sample_row does the float arithmetic the CPU sampler
// does on its parameters (1 / temperature, log(min_p), the greedy rule) on the host, so the
// device uses the very same values.
struct SampleRow {
  float inv_temperature = 1.0f;
  float top_p = 1.0f;      // (0, 1]; 1 = off
  float log_min_p = 0.0f;  // std::log(min_p) when use_min_p
  int32_t top_k = 0;       // 0 = off
  uint8_t greedy = 0;      // temperature < 1e-5 or top_k == 1: the argmax
  uint8_t use_min_p = 0;
  uint64_t seed = 0;
  uint64_t stream_id = 0;  // engine::sample's stream: 0 with a seed, the request key without
  uint64_t step = 0;
};
SampleRow make_sample_row(float temperature, int top_k, float top_p, float min_p, uint64_t seed,
                          uint64_t stream_id, uint64_t step);

// tokens[r] = engine::sample's token for row r of logits (already biased, penalized and masked:
// -inf = disallowed, NaN counts as -inf), -1 when nothing is allowed. Candidates in the CPU's
// lists and orders: top-k keeps the k best by (logit desc, id asc), sorted; top-p without top-k
// keeps whole logit buckets in id order plus the sorted prefix of the boundary bucket (the
// CPU's 2048 buckets over 40 logits); min-p drops logits below top + log(min_p); the draw walks
// that list with the row's Philox uniform. The double sums are taken in a fixed order of their
// own (chunked, then joined in index order), not the CPU's sequential one, so a token differs
// from the CPU's only when a sum lands within rounding of a boundary. One block per row, its
// work fixed by the row alone (batch-invariant).
struct SampleParams {
  const float* logits = nullptr;  // [rows, stride]
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t stride = 0;
  const SampleRow* row_params = nullptr;  // [rows]
  uint64_t* scratch = nullptr;            // [rows, scratch_stride]: sort keys and weights
  int64_t scratch_stride = 0;             // >= sample_scratch_elems(vocab)
  int32_t* tokens = nullptr;              // [rows]
};
// Scratch elements one row needs: vocab rounded up to a power of two (the bitonic sort).
inline int64_t sample_scratch_elems(int64_t vocab) {
  int64_t n = 1;
  while (n < vocab) n <<= 1;
  return n;
}
void sample_rows(const SampleParams& p, cudaStream_t stream);

}  // namespace deepinfer::cuda
