// AVX2 inner loops of paged attention for f32/f16/bf16 K/V: scores of up to 4 query rows
// against a chunk of keys, the probability-weighted V sum over a chunk, and exp-and-sum. One
// accumulator chain per (row, key) or (row, lane), so a row never depends on its neighbours.
#include <immintrin.h>

#include <cmath>
#include <type_traits>

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

// Sums each of four vectors to one float with the same add tree for every slot, so a row's
// score does not depend on which slot it sits in or what the other slots hold.
inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 t01 = _mm256_add_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
  const __m256 t23 = _mm256_add_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

// NQ rows x KB keys of independent accumulator chains (NQ, KB template arguments so they live
// in registers); every (row, key) pair is computed the same way whatever NQ and KB are.
template <typename L, int NQ, int KB>
inline void qk_block(const float* const* q, const void* const* k, int j, int n, float scale, float* const* out) {
  __m256 acc[KB][4];
  for (int b = 0; b < KB; ++b)
    for (int r = 0; r < 4; ++r) acc[b][r] = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int b = 0; b < KB; ++b) {
      const __m256 kv = L::load8(k[j + b], i);
      for (int r = 0; r < NQ; ++r) acc[b][r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + i), kv, acc[b][r]);
    }
  }
  for (int b = 0; b < KB; ++b) {
    alignas(16) float s[4];
    _mm_store_ps(s, reduce4(acc[b][0], acc[b][1], acc[b][2], acc[b][3]));
    for (int r = 0; r < NQ; ++r) {
      float sum = s[r];
      for (int d = i; d < n; ++d) sum = std::fma(q[r][d], L::load1(k[j + b], d), sum);  // as the lanes
      out[r][j + b] = sum * scale;
    }
  }
}

template <typename L, int NQ>
void qk_n(const float* const* q, const void* const* k, int nk, int n, float scale, float* const* out) {
  // 12 accumulator chains (NQ x kKeys) of the 16 ymm registers: enough independent FMAs in
  // flight to cover their latency, with a register left for the key vector.
  constexpr int kKeys = NQ == 4 ? 3 : NQ == 3 ? 4 : NQ == 2 ? 6 : 8;
  int j = 0;
  for (; j + kKeys <= nk; j += kKeys) qk_block<L, NQ, kKeys>(q, k, j, n, scale, out);
  for (; j < nk; ++j) qk_block<L, NQ, 1>(q, k, j, n, scale, out);
}

template <typename L>
void qk_rows(const float* const* q, int nq, const void* const* k, int nk, int n, float scale, float* const* out) {
  switch (nq) {
    case 1: return qk_n<L, 1>(q, k, nk, n, scale, out);
    case 2: return qk_n<L, 2>(q, k, nk, n, scale, out);
    case 3: return qk_n<L, 3>(q, k, nk, n, scale, out);
    default: return qk_n<L, 4>(q, k, nk, n, scale, out);
  }
}

// NR rows x V vectors of accumulators (8 output dims each) stay in registers while the chunk's
// keys stream by; each lane still accumulates in key order, so the slice width never changes
// a result.
template <typename L, int NR, int V>
inline void pv_slice(float* const* acc, const float* const* w, const void* const* v, int nk, int d) {
  __m256 a[NR][V];
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < V; ++i) a[r][i] = _mm256_loadu_ps(acc[r] + d + 8 * i);
  for (int j = 0; j < nk; ++j) {
    __m256 vv[V];
    for (int i = 0; i < V; ++i) vv[i] = L::load8(v[j], d + 8 * i);
    for (int r = 0; r < NR; ++r) {
      const __m256 bw = _mm256_set1_ps(w[r][j]);
      for (int i = 0; i < V; ++i) a[r][i] = _mm256_fmadd_ps(bw, vv[i], a[r][i]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < V; ++i) _mm256_storeu_ps(acc[r] + d + 8 * i, a[r][i]);
}

// 32 output dims at a time for up to 2 rows, and for 3 rows of f32 V (whose loads fold into
// the FMAs, leaving the 16 ymm registers to 12 accumulators and the broadcast weight); 16 dims
// otherwise.
template <typename L, int NR>
void pv_n(float* const* acc, const float* const* w, const void* const* v, int nk, int n) {
  int d = 0;
  if constexpr (NR <= 2 || (NR == 3 && std::is_same_v<L, F32>))
    for (; d + 32 <= n; d += 32) pv_slice<L, NR, 4>(acc, w, v, nk, d);
  for (; d + 16 <= n; d += 16) pv_slice<L, NR, 2>(acc, w, v, nk, d);
  for (; d + 8 <= n; d += 8) {
    __m256 a[NR];
    for (int r = 0; r < NR; ++r) a[r] = _mm256_loadu_ps(acc[r] + d);
    for (int j = 0; j < nk; ++j) {
      const __m256 v0 = L::load8(v[j], d);
      for (int r = 0; r < NR; ++r) a[r] = _mm256_fmadd_ps(_mm256_set1_ps(w[r][j]), v0, a[r]);
    }
    for (int r = 0; r < NR; ++r) _mm256_storeu_ps(acc[r] + d, a[r]);
  }
  for (; d < n; ++d)
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < nk; ++j) acc[r][d] = std::fma(w[r][j], L::load1(v[j], d), acc[r][d]);
}

template <typename L>
void pv_rows(float* const* acc, const float* const* w, int nr, const void* const* v, int nk, int n) {
  switch (nr) {
    case 1: return pv_n<L, 1>(acc, w, v, nk, n);
    case 2: return pv_n<L, 2>(acc, w, v, nk, n);
    case 3: return pv_n<L, 3>(acc, w, v, nk, n);
    default: return pv_n<L, 4>(acc, w, v, nk, n);
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
    case DType::kF32: return {qk_rows<F32>, pv_rows<F32>, exp_sum};
    case DType::kF16: return {qk_rows<F16>, pv_rows<F16>, exp_sum};
    default: return {qk_rows<BF16>, pv_rows<BF16>, exp_sum};
  }
}

}  // namespace deepinfer::kernels::detail
