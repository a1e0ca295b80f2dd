// AVX-512 RMSNorm: four 16-lane accumulators for the sum of squares, then one scaling pass.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/rms_norm.h"

namespace deepinfer::kernels::detail {

void rms_norm_avx512(const RmsNormParams& p) {
  const int64_t n = p.dim;
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.x_stride;
    float* y = p.y + r * p.y_stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
      __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
      a0 = _mm512_fmadd_ps(v0, v0, a0);
      a1 = _mm512_fmadd_ps(v1, v1, a1);
      a2 = _mm512_fmadd_ps(v2, v2, a2);
      a3 = _mm512_fmadd_ps(v3, v3, a3);
    }
    for (; i + 16 <= n; i += 16) {
      __m512 v = _mm512_loadu_ps(x + i);
      a0 = _mm512_fmadd_ps(v, v, a0);
    }
    if (i < n) {
      __m512 v = _mm512_maskz_loadu_ps(simd::tail_mask512(static_cast<int>(n - i)), x + i);
      a1 = _mm512_fmadd_ps(v, v, a1);
    }
    const float ss = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(n) + p.eps));
    for (i = 0; i + 16 <= n; i += 16) {
      __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), inv);
      if (p.w) v = _mm512_mul_ps(v, _mm512_loadu_ps(p.w + i));
      _mm512_storeu_ps(y + i, v);
    }
    if (i < n) {
      const __mmask16 m = simd::tail_mask512(static_cast<int>(n - i));
      __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
      if (p.w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, p.w + i));
      _mm512_mask_storeu_ps(y + i, m, v);
    }
  }
}

}  // namespace deepinfer::kernels::detail
