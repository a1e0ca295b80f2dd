// AVX2 RMSNorm: four 8-lane accumulators for the sum of squares, then one scaling pass.
#include <immintrin.h>

#include <cmath>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/rms_norm.h"

namespace deepinfer::kernels::detail {

void rms_norm_avx2(const RmsNormParams& p) {
  const int64_t n = p.dim;
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.x_stride;
    float* y = p.y + r * p.y_stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
      __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
      a0 = _mm256_fmadd_ps(v0, v0, a0);
      a1 = _mm256_fmadd_ps(v1, v1, a1);
      a2 = _mm256_fmadd_ps(v2, v2, a2);
      a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_loadu_ps(x + i);
      a0 = _mm256_fmadd_ps(v, v, a0);
    }
    if (i < n) {
      __m256 v = _mm256_maskload_ps(x + i, simd::tail_mask256(static_cast<int>(n - i)));
      a1 = _mm256_fmadd_ps(v, v, a1);
    }
    const float ss = simd::hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(n) + p.eps));
    for (i = 0; i + 8 <= n; i += 8) {
      __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), inv);
      if (p.w) v = _mm256_mul_ps(v, _mm256_loadu_ps(p.w + i));
      _mm256_storeu_ps(y + i, v);
    }
    if (i < n) {
      const __m256i m = simd::tail_mask256(static_cast<int>(n - i));
      __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv);
      if (p.w) v = _mm256_mul_ps(v, _mm256_maskload_ps(p.w + i, m));
      _mm256_maskstore_ps(y + i, m, v);
    }
  }
}

}  // namespace deepinfer::kernels::detail
