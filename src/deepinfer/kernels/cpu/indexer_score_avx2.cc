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
      const float dot = simd::dot256(q, k, D);
      total += std::max(dot, 0.0f) * p.scale * p.w[h];
    }
    out[e] = total;
  }
}

}  // namespace deepinfer::kernels::detail
