// AVX2 inner loops of paged attention: q.k dot products and acc += a * v, for f32/f16/bf16 K/V.
#include <immintrin.h>

#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/elementwise_simd.h"

namespace deepinfer::kernels::detail {
namespace {

struct F32 {
  static __m256 load8(const void* p, int i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
  static float load1(const void* p, int i) { return static_cast<const float*>(p)[i]; }
};
struct F16 {
  static __m256 load8(const void* p, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static float load1(const void* p, int i) { return f16_to_f32(static_cast<const uint16_t*>(p)[i]); }
};
struct BF16 {
  static __m256 load8(const void* p, int i) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(const void* p, int i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); }
};

template <typename L>
float dot(const float* q, const void* k, int n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), L::load8(k, i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), L::load8(k, i + 8), a1);
  }
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), L::load8(k, i), a0);
    i += 8;
  }
  float sum = simd::hsum256(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) sum += q[i] * L::load1(k, i);
  return sum;
}

template <typename L>
void axpy(float* acc, float a, const void* v, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, L::load8(v, i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += a * L::load1(v, i);
}

}  // namespace

AttentionOps attention_ops_avx2(DType kv_type) {
  switch (kv_type) {
    case DType::kF32: return {dot<F32>, axpy<F32>};
    case DType::kF16: return {dot<F16>, axpy<F16>};
    default: return {dot<BF16>, axpy<BF16>};
  }
}

}  // namespace deepinfer::kernels::detail
