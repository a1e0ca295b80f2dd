// AVX2 inner loops of paged attention for f32/f16/bf16 K/V: multi-row q.k dots, multi-row
// acc += a * v, and exp-and-sum of a score run. One accumulator chain per row, so a row's
// result does not depend on how many rows share the call.
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

template <typename L, int NQ>
void dot_n(const float* const* q, const void* k, int n, float* out) {
  __m256 acc[NQ];
  for (int r = 0; r < NQ; ++r) acc[r] = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 kv = L::load8(k, i);
    for (int r = 0; r < NQ; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + i), kv, acc[r]);
  }
  for (int r = 0; r < NQ; ++r) {
    float sum = simd::hsum256(acc[r]);
    for (int j = i; j < n; ++j) sum += q[r][j] * L::load1(k, j);
    out[r] = sum;
  }
}

template <typename L>
void dot_rows(const float* const* q, int nq, const void* k, int n, float* out) {
  switch (nq) {
    case 1: return dot_n<L, 1>(q, k, n, out);
    case 2: return dot_n<L, 2>(q, k, n, out);
    case 3: return dot_n<L, 3>(q, k, n, out);
    default: return dot_n<L, 4>(q, k, n, out);
  }
}

template <typename L>
void axpy_rows(float* const* acc, const float* a, int nr, const void* v, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vv = L::load8(v, i);
    for (int r = 0; r < nr; ++r)
      _mm256_storeu_ps(acc[r] + i, _mm256_fmadd_ps(_mm256_set1_ps(a[r]), vv, _mm256_loadu_ps(acc[r] + i)));
  }
  for (; i < n; ++i) {
    const float x = L::load1(v, i);
    for (int r = 0; r < nr; ++r) acc[r][i] += a[r] * x;
  }
}

float exp_sum(float* s, int n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = simd::exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    const __m256i mask = simd::tail_mask256(n - i);
    const __m256 e = _mm256_and_ps(simd::exp256(_mm256_sub_ps(_mm256_maskload_ps(s + i, mask), vm)),
                                   _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(s + i, mask, e);
    sum = _mm256_add_ps(sum, e);
  }
  return simd::hsum256(sum);
}

}  // namespace

AttentionOps attention_ops_avx2(DType kv_type) {
  switch (kv_type) {
    case DType::kF32: return {dot_rows<F32>, axpy_rows<F32>, exp_sum};
    case DType::kF16: return {dot_rows<F16>, axpy_rows<F16>, exp_sum};
    default: return {dot_rows<BF16>, axpy_rows<BF16>, exp_sum};
  }
}

}  // namespace deepinfer::kernels::detail
