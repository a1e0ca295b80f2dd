// AVX2 indexer scores: per key, each head's dot product in 8 lanes (two accumulators, scalar
// tail), reduced, relu'd and weighted.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/indexer_score.h"

namespace deepinfer::kernels::detail {

void indexer_scores_avx2(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                         float* out) {
  const int D = p.dim;
  for (int64_t e = 0; e < n; ++e) {
    const float* k = keys[e];
    float total = 0;
    for (int h = 0; h < p.n_heads; ++h) {
      const float* q = p.q + int64_t{h} * D;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      int d = 0;
      for (; d + 16 <= D; d += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), _mm256_loadu_ps(k + d + 8), a1);
      }
      for (; d + 8 <= D; d += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a0);
      float dot = simd::hsum256(_mm256_add_ps(a0, a1));
      for (; d < D; ++d) dot += q[d] * k[d];
      total += std::max(dot, 0.0f) * p.scale * p.w[h];
    }
    out[e] = total;
  }
}

}  // namespace deepinfer::kernels::detail
