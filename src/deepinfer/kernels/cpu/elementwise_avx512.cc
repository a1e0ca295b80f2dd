// AVX-512 element-wise kernels (16 lanes; masked tail).
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/elementwise_simd.h"

namespace deepinfer::kernels::detail {
namespace {

inline __m512 silu16(__m512 x) {
  const __m512 e = simd::exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
inline __m512 gelu16(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(x2, _mm512_set1_ps(0.044715f)), x, x);
  const __m512 s2 = _mm512_mul_ps(inner, _mm512_set1_ps(-2.0f * 0.7978845608028654f));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), simd::exp512(s2)));
}

inline __m512 apply(BinaryOp op, __m512 a, __m512 b) {
  switch (op) {
    case BinaryOp::kAdd: return _mm512_add_ps(a, b);
    case BinaryOp::kSwiglu: return _mm512_mul_ps(silu16(a), b);
    case BinaryOp::kGeglu: return _mm512_mul_ps(gelu16(a), b);
  }
  return a;
}

}  // namespace

void binary_avx512(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, apply(op, _mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = simd::tail_mask512(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(out + i, m, apply(op, _mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void unary_avx512(UnaryOp op, const float* x, float* out, int64_t n) {
  auto f = [op](__m512 v) { return op == UnaryOp::kSilu ? silu16(v) : gelu16(v); };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = simd::tail_mask512(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(out + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace deepinfer::kernels::detail
