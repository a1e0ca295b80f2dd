// AVX-512 sink attention: per head, 16-wide FMA dot products, a vectorized exp over the scores,
// then the weighted sum of the key rows into the output.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/sink_attention.h"

namespace deepinfer::kernels::detail {
namespace {

// o[0..n) += w * k[0..n)
void axpy512(float w, const float* k, float* o, int n) {
  const __m512 vw = _mm512_set1_ps(w);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, _mm512_fmadd_ps(vw, _mm512_loadu_ps(k + i), _mm512_loadu_ps(o + i)));
  if (i < n) {
    const __mmask16 m = simd::tail_mask512(n - i);
    _mm512_mask_storeu_ps(o + i, m, _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(m, k + i),
                                                    _mm512_maskz_loadu_ps(m, o + i)));
  }
}

}  // namespace

void sink_attention_avx512(const SinkAttentionParams& p) {
  const int D = p.head_dim;
  const int64_t n = p.n_keys;
  for (int h = 0; h < p.n_heads; ++h) {
    const float* q = p.q + int64_t{h} * D;
    float* o = p.out + int64_t{h} * D;
    float mx = p.sinks ? p.sinks[h] : -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      p.scores[j] = simd::dot512(q, p.keys[j], D) * p.scale;
      mx = std::max(mx, p.scores[j]);
    }
    for (int c = 0; c < D; ++c) o[c] = 0;
    if (mx == -std::numeric_limits<float>::infinity()) continue;  // no keys, no sink
    // Exponentials in place, summed in 16 lanes.
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 vsum = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m512 e = simd::exp512(_mm512_sub_ps(_mm512_loadu_ps(p.scores + j), vm));
      _mm512_storeu_ps(p.scores + j, e);
      vsum = _mm512_add_ps(vsum, e);
    }
    if (j < n) {
      const __mmask16 m = simd::tail_mask512(static_cast<int>(n - j));
      const __m512 e = simd::exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p.scores + j), vm));
      _mm512_mask_storeu_ps(p.scores + j, m, e);
      vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
    }
    float denom = _mm512_reduce_add_ps(vsum);
    if (p.sinks) denom += std::exp(p.sinks[h] - mx);
    const float inv = 1.0f / denom;
    for (j = 0; j < n; ++j) axpy512(p.scores[j] * inv, p.keys[j], o, D);
  }
}

}  // namespace deepinfer::kernels::detail
