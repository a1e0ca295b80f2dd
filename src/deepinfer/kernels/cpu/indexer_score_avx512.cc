// AVX-512 indexer scores, four keys at a time: per head, each key's dot product runs in 16
// lanes over two accumulator chains (the even and odd 16-float slices, the masked tail on the
// second), the four keys' lanes are summed by one shared add tree, relu'd, scaled and weighted,
// and added to the keys' totals head by head. A key's score is computed the same way whatever
// its slot in the group and whatever the other keys are (a tail group repeats its last key), so
// a query's scores never depend on n or on the order of the other keys.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/indexer_score.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kKeys = 4;

// Scores of the four keys k[0..3] into out[0..3].
inline void score_group(const IndexerScoreParams& p, const float* const* k, float* out) {
  const int D = p.dim;
  const __m128 scale = _mm_set1_ps(p.scale), zero = _mm_setzero_ps();
  __m128 total = _mm_setzero_ps();
  for (int h = 0; h < p.n_heads; ++h) {
    const float* q = p.q + int64_t{h} * D;
    __m512 even[kKeys], odd[kKeys];
    for (int j = 0; j < kKeys; ++j) even[j] = odd[j] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= D; i += 32) {
      const __m512 q0 = _mm512_loadu_ps(q + i), q1 = _mm512_loadu_ps(q + i + 16);
      for (int j = 0; j < kKeys; ++j) {
        even[j] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(k[j] + i), even[j]);
        odd[j] = _mm512_fmadd_ps(q1, _mm512_loadu_ps(k[j] + i + 16), odd[j]);
      }
    }
    if (i + 16 <= D) {
      const __m512 q0 = _mm512_loadu_ps(q + i);
      for (int j = 0; j < kKeys; ++j)
        even[j] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(k[j] + i), even[j]);
      i += 16;
    }
    if (i < D) {
      const __mmask16 m = simd::tail_mask512(D - i);
      const __m512 q0 = _mm512_maskz_loadu_ps(m, q + i);
      for (int j = 0; j < kKeys; ++j)
        odd[j] = _mm512_fmadd_ps(q0, _mm512_maskz_loadu_ps(m, k[j] + i), odd[j]);
    }
    const __m128 dots = simd::sum_lanes4_512(_mm512_add_ps(even[0], odd[0]), _mm512_add_ps(even[1], odd[1]),
                                   _mm512_add_ps(even[2], odd[2]), _mm512_add_ps(even[3], odd[3]));
    const __m128 weighted =
        _mm_mul_ps(_mm_mul_ps(_mm_max_ps(dots, zero), scale), _mm_set1_ps(p.w[h]));
    total = _mm_add_ps(total, weighted);
  }
  _mm_storeu_ps(out, total);
}

}  // namespace

void indexer_scores_avx512(const IndexerScoreParams& p, const float* const* keys, int64_t n,
                           float* out) {
  int64_t e = 0;
  for (; e + kKeys <= n; e += kKeys) score_group(p, keys + e, out + e);
  if (e == n) return;
  const float* tail[kKeys];
  for (int j = 0; j < kKeys; ++j) tail[j] = keys[std::min(e + j, n - 1)];
  float tail_out[kKeys];
  score_group(p, tail, tail_out);
  std::copy_n(tail_out, n - e, out + e);
}

}  // namespace deepinfer::kernels::detail
