// AVX2 sink attention: per head, 8-wide FMA dot products, a vectorized exp over the scores,
// then the weighted sum of the key rows into the output (scalar tails).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/sink_attention.h"

namespace deepinfer::kernels::detail {
namespace {

void axpy256(float w, const float* k, float* o, int n) {
  const __m256 vw = _mm256_set1_ps(w);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(k + i), _mm256_loadu_ps(o + i)));
  for (; i < n; ++i) o[i] = std::fma(w, k[i], o[i]);  // as the lanes
}

}  // namespace

void sink_attention_avx2(const SinkAttentionParams& p) {
  const int D = p.head_dim;
  const int64_t n = p.n_keys;
  for (int h = 0; h < p.n_heads; ++h) {
    const float* q = p.q + int64_t{h} * D;
    float* o = p.out + int64_t{h} * D;
    float mx = p.sinks ? p.sinks[h] : -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      p.scores[j] = simd::dot256(q, p.keys[j], D) * p.scale;
      mx = std::max(mx, p.scores[j]);
    }
    for (int c = 0; c < D; ++c) o[c] = 0;
    if (mx == -std::numeric_limits<float>::infinity()) continue;  // no keys, no sink
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 vsum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 e = simd::exp256(_mm256_sub_ps(_mm256_loadu_ps(p.scores + j), vm));
      _mm256_storeu_ps(p.scores + j, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    float denom = simd::hsum256(vsum);
    for (; j < n; ++j) {
      p.scores[j] = std::exp(p.scores[j] - mx);
      denom += p.scores[j];
    }
    if (p.sinks) denom += std::exp(p.sinks[h] - mx);
    const float inv = 1.0f / denom;
    for (j = 0; j < n; ++j) axpy256(p.scores[j] * inv, p.keys[j], o, D);
  }
}

}  // namespace deepinfer::kernels::detail
