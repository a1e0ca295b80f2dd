// Indexer score: the scalar reference and the dispatch.
#include "deepinfer/kernels/cpu/indexer_score.h"

#include <algorithm>

namespace deepinfer::kernels {

float indexer_score_reference(const IndexerScoreParams& p, const float* key) {
  float total = 0;
  for (int h = 0; h < p.n_heads; ++h) {
    const float* q = p.q + int64_t{h} * p.dim;
    float dot = 0;
    for (int d = 0; d < p.dim; ++d) dot += q[d] * key[d];
    total += std::max(dot, 0.0f) * p.scale * p.w[h];
  }
  return total;
}

void indexer_scores_with_isa(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                             float* out, IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) return detail::indexer_scores_avx512(p, keys, n, out);
  if (isa >= IsaLevel::kAvx2) return detail::indexer_scores_avx2(p, keys, n, out);
  for (int64_t e = 0; e < n; ++e) out[e] = indexer_score_reference(p, keys[e]);
}

void indexer_scores(const IndexerScoreParams& p, const float* const* keys, int64_t n, float* out) {
  indexer_scores_with_isa(p, keys, n, out, best_isa());
}

}  // namespace deepinfer::kernels
