// AVX2 element-wise kernels (8 lanes; masked tail so odd sizes take the same vector path).
#include <immintrin.h>

#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/elementwise_simd.h"

namespace deepinfer::kernels::detail {
namespace {

// sigmoid-style form shared by SiLU and GELU-tanh: x / (1 + exp(-k(x))).
inline __m256 silu8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = simd::exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(one, e));
}
inline __m256 gelu8(__m256 x) {
  // 0.5 x (1 + tanh(s)) = x / (1 + exp(-2s)), s = sqrt(2/pi) (x + 0.044715 x^3)
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(x2, _mm256_set1_ps(0.044715f)), x, x);
  const __m256 s2 = _mm256_mul_ps(inner, _mm256_set1_ps(-2.0f * 0.7978845608028654f));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), simd::exp256(s2)));
}

inline __m256 apply(BinaryOp op, __m256 a, __m256 b) {
  switch (op) {
    case BinaryOp::kAdd: return _mm256_add_ps(a, b);
    case BinaryOp::kSwiglu: return _mm256_mul_ps(silu8(a), b);
    case BinaryOp::kGeglu: return _mm256_mul_ps(gelu8(a), b);
  }
  return a;
}

}  // namespace

void binary_avx2(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, apply(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    const __m256i m = simd::tail_mask256(static_cast<int>(n - i));
    _mm256_maskstore_ps(out + i, m, apply(op, _mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

void unary_avx2(UnaryOp op, const float* x, float* out, int64_t n) {
  auto f = [op](__m256 v) { return op == UnaryOp::kSilu ? silu8(v) : gelu8(v); };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = simd::tail_mask256(static_cast<int>(n - i));
    _mm256_maskstore_ps(out + i, m, f(_mm256_maskload_ps(x + i, m)));
  }
}

}  // namespace deepinfer::kernels::detail
