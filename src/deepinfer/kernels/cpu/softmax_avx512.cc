// AVX-512 softmax: max pass, exp-and-sum pass (polynomial exp), scale pass.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <limits>

#include "deepinfer/kernels/cpu/elementwise_simd.h"
#include "deepinfer/kernels/cpu/softmax.h"

namespace deepinfer::kernels::detail {

void softmax_avx512(const float* x, float* y, int64_t n, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  const int tail = static_cast<int>(n - i);
  const __mmask16 tm = simd::tail_mask512(tail);
  if (tail) vmax = _mm512_mask_max_ps(vmax, tm, vmax, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, x + i), vs));
  const float mx = _mm512_reduce_max_ps(vmax);
  if (mx == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) y[j] = 0.0f;
    return;
  }
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    __m512 e = simd::exp512(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vm));
    _mm512_storeu_ps(y + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (tail) {
    __m512 e = _mm512_maskz_mov_ps(tm, simd::exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(tm, x + i), vs, vm)));
    _mm512_mask_storeu_ps(y + i, tm, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (tail) _mm512_mask_storeu_ps(y + i, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, y + i), inv));
}

}  // namespace deepinfer::kernels::detail
