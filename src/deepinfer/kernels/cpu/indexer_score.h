// DeepSeek-V4's Lightning indexer score of one compressed entry for one query:
// score = scale * sum_h w_h * relu(q_h . k), q [n_heads, dim], w [n_heads], k [dim].
// The scalar reference sums each dot product in order in float, as the model did before; the
// AVX2/AVX-512 variants use lanes (a different but fixed order, so a query's scores never
// depend on its batch). Chosen at run time.
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

struct IndexerScoreParams {
  const float* q;  // [n_heads, dim] the query's indexer heads
  const float* w;  // [n_heads] per-head weights
  int n_heads;
  int dim;
  float scale;
};

float indexer_score_reference(const IndexerScoreParams& p, const float* key);
// Scores of n keys (keys[e] points at dim floats) into out[e].
void indexer_scores(const IndexerScoreParams& p, const float* const* keys, int64_t n, float* out);
void indexer_scores_with_isa(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                             float* out, IsaLevel isa);

namespace detail {
void indexer_scores_avx2(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                         float* out);
void indexer_scores_avx512(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                           float* out);
}  // namespace detail

}  // namespace deepinfer::kernels
