// AVX-512 inner loops of paged attention: q.k dot products and acc += a * v, for f32/f16/bf16
// K/V, with masked tails.
#include <immintrin.h>

#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/elementwise_simd.h"

namespace deepinfer::kernels::detail {
namespace {

struct F32 {
  static __m512 load(const void* p, int i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
  }
};
struct F16 {
  static __m512 load(const void* p, int i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  }
};
struct BF16 {
  static __m512 load(const void* p, int i, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

template <typename L>
float dot(const float* q, const void* k, int n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0;
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), L::load(k, i, 0xffff), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), L::load(k, i + 16, 0xffff), a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : simd::tail_mask512(n - i);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), L::load(k, i, m), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <typename L>
void axpy(float* acc, float a, const void* v, int n) {
  const __m512 va = _mm512_set1_ps(a);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : simd::tail_mask512(n - i);
    _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(va, L::load(v, i, m), _mm512_maskz_loadu_ps(m, acc + i)));
  }
}

}  // namespace

AttentionOps attention_ops_avx512(DType kv_type) {
  switch (kv_type) {
    case DType::kF32: return {dot<F32>, axpy<F32>};
    case DType::kF16: return {dot<F16>, axpy<F16>};
    default: return {dot<BF16>, axpy<BF16>};
  }
}

}  // namespace deepinfer::kernels::detail
