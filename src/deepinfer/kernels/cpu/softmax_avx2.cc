// AVX2 softmax: max pass, exp-and-sum pass (polynomial exp), scale pass.
#include <immintrin.h>

#include <limits>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/softmax.h"

namespace deepinfer::kernels::detail {

void softmax_avx2(const float* x, float* y, int64_t n, float scale) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = ninf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  const int tail = static_cast<int>(n - i);
  const __m256i tm = simd::tail_mask256(tail);
  if (tail) {
    __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, tm), vs);
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(tm)));
  }
  const float mx = simd::hmax256(vmax);
  if (mx == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) y[j] = 0.0f;
    return;
  }
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 e = simd::exp256(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
    _mm256_storeu_ps(y + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (tail) {
    __m256 e = simd::exp256(_mm256_fmsub_ps(_mm256_maskload_ps(x + i, tm), vs, vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(tm));
    _mm256_maskstore_ps(y + i, tm, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / simd::hsum256(vsum));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  if (tail) _mm256_maskstore_ps(y + i, tm, _mm256_mul_ps(_mm256_maskload_ps(y + i, tm), inv));
}

}  // namespace deepinfer::kernels::detail
