// AVX-512 inner loops of paged attention for f32/f16/bf16 K/V (masked tails): multi-row q.k
// dots, multi-row acc += a * v, and exp-and-sum of a score run. One accumulator chain per row,
// so a row's result does not depend on how many rows share the call.
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

inline __mmask16 lanes(int left) { return left >= 16 ? __mmask16(0xffff) : simd::tail_mask512(left); }

template <typename L, int NQ>
void dot_n(const float* const* q, const void* k, int n, float* out) {
  __m512 acc[NQ];
  for (int r = 0; r < NQ; ++r) acc[r] = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    const __m512 kv = L::load(k, i, m);
    for (int r = 0; r < NQ; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q[r] + i), kv, acc[r]);
  }
  for (int r = 0; r < NQ; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
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
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    const __m512 vv = L::load(v, i, m);
    for (int r = 0; r < nr; ++r)
      _mm512_mask_storeu_ps(acc[r] + i, m,
                            _mm512_fmadd_ps(_mm512_set1_ps(a[r]), vv, _mm512_maskz_loadu_ps(m, acc[r] + i)));
  }
}

float exp_sum(float* s, int n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 k = lanes(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, simd::exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), vm)));
    _mm512_mask_storeu_ps(s + i, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

}  // namespace

AttentionOps attention_ops_avx512(DType kv_type) {
  switch (kv_type) {
    case DType::kF32: return {dot_rows<F32>, axpy_rows<F32>, exp_sum};
    case DType::kF16: return {dot_rows<F16>, axpy_rows<F16>, exp_sum};
    default: return {dot_rows<BF16>, axpy_rows<BF16>, exp_sum};
  }
}

}  // namespace deepinfer::kernels::detail
