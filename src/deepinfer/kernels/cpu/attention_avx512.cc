// AVX-512 inner loops of paged attention for f32/f16/bf16 K/V: scores of up to 4 query rows
// against a chunk of keys, the probability-weighted V sum over a chunk, and exp-and-sum. One
// accumulator chain per (row, key) or (row, lane), so a row never depends on its neighbours.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

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
inline __mmask16 lanes_or_none(int left) { return left <= 0 ? __mmask16(0) : lanes(left); }

// bf16 without port-5 widening: 32 bf16 elements as 16 32-bit pairs; the high half of a
// pair is already the odd element as f32 once its low half is masked off, and the even one
// is the pair shifted left by 16. The V sum keeps its accumulators split the same way.
inline __mmask32 lanes32(int left) {
  return left >= 32 ? __mmask32(0xffffffff) : left <= 0 ? __mmask32(0) : __mmask32((1u << left) - 1);
}
inline __m512i load_pairs(const void* p, int i, __mmask32 m) {
  return _mm512_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
}
inline __m512 even_of(__m512i x) { return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)); }
inline __m512 odd_of(__m512i x) {
  return _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
// Even and odd elements of f32 x[i, i + 32) (zero past `left`), and back.
inline void split_pairs(const float* x, int left, __m512* even, __m512* odd) {
  const __m512 lo = _mm512_maskz_loadu_ps(lanes_or_none(left), x);
  const __m512 hi = _mm512_maskz_loadu_ps(lanes_or_none(left - 16), x + 16);
  const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  *even = _mm512_permutex2var_ps(lo, ie, hi);
  *odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), hi);
}
inline void join_pairs(__m512 even, __m512 odd, float* x, int left) {
  const __m512i il = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i ih = _mm512_add_epi32(il, _mm512_set1_epi32(8));
  _mm512_mask_storeu_ps(x, lanes_or_none(left), _mm512_permutex2var_ps(even, il, odd));
  _mm512_mask_storeu_ps(x + 16, lanes_or_none(left - 16), _mm512_permutex2var_ps(even, ih, odd));
}

// NQ rows x KB keys of independent accumulator chains (NQ, KB template arguments so they live
// in registers); every (row, key) pair is computed the same way whatever NQ and KB are.
template <typename L, int NQ, int KB>
inline void qk_block(const float* const* q, const void* const* k, int j, int n, float scale, float* const* out) {
  __m512 acc[KB][4];
  for (int b = 0; b < KB; ++b)
    for (int r = 0; r < 4; ++r) acc[b][r] = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    __m512 qv[NQ];
    for (int r = 0; r < NQ; ++r) qv[r] = _mm512_maskz_loadu_ps(m, q[r] + i);
    for (int b = 0; b < KB; ++b) {
      const __m512 kv = L::load(k[j + b], i, m);
      for (int r = 0; r < NQ; ++r) acc[b][r] = _mm512_fmadd_ps(qv[r], kv, acc[b][r]);
    }
  }
  for (int b = 0; b < KB; ++b) {
    alignas(16) float s[4];
    _mm_store_ps(s, _mm_mul_ps(simd::sum_lanes4_512(acc[b][0], acc[b][1], acc[b][2], acc[b][3]), _mm_set1_ps(scale)));
    for (int r = 0; r < NQ; ++r) out[r][j + b] = s[r];
  }
}

// The V sum with the accumulators split into even and odd dims for the chunk: each output
// dim still accumulates w * v in key order in one chain, so the bits are those of pv_n.
template <int NR>
void pv_n_bf16(float* const* acc, const float* const* w, const void* const* v, int nk, int n) {
  for (int d = 0; d < n; d += 64) {
    const __mmask32 m0 = lanes32(n - d), m1 = lanes32(n - d - 32);
    __m512 a[NR][4];  // even, odd of dims [d, d + 32), then of [d + 32, d + 64)
    for (int r = 0; r < NR; ++r) {
      split_pairs(acc[r] + d, n - d, &a[r][0], &a[r][1]);
      split_pairs(acc[r] + d + 32, n - d - 32, &a[r][2], &a[r][3]);
    }
    for (int j = 0; j < nk; ++j) {
      const __m512i x0 = load_pairs(v[j], d, m0), x1 = load_pairs(v[j], d + 32, m1);
      const __m512 vv[4] = {even_of(x0), odd_of(x0), even_of(x1), odd_of(x1)};
      for (int r = 0; r < NR; ++r) {
        const __m512 bw = _mm512_set1_ps(w[r][j]);
        for (int b = 0; b < 4; ++b) a[r][b] = _mm512_fmadd_ps(bw, vv[b], a[r][b]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      join_pairs(a[r][0], a[r][1], acc[r] + d, n - d);
      join_pairs(a[r][2], a[r][3], acc[r] + d + 32, n - d - 32);
    }
  }
}

template <typename L, int NQ>
void qk_n(const float* const* q, const void* const* k, int nk, int n, float scale, float* const* out) {
  constexpr int kKeys = NQ >= 3 ? 2 : 4;
  int j = 0;
  for (; j + kKeys <= nk; j += kKeys) qk_block<L, NQ, kKeys>(q, k, j, n, scale, out);
  for (; j < nk; ++j) qk_block<L, NQ, 1>(q, k, j, n, scale, out);
}

// Decode-shaped fast path (head size a multiple of 16, up to 16 vectors of queries): the NQ
// rows' queries stay in registers while the keys stream by, and one sum_lanes4_512 sums four keys of
// the same row. Each (row, key) score is the same chain and add tree as in qk_block, so the
// two paths give the same bits.
template <typename L, int NQ, int ND>
void qk_regs(const float* const* q, const void* const* k, int nk, float scale, float* const* out) {
  __m512 qv[NQ][ND];
  for (int r = 0; r < NQ; ++r)
    for (int i = 0; i < ND; ++i) qv[r][i] = _mm512_loadu_ps(q[r] + 16 * i);
  const __m128 vs = _mm_set1_ps(scale);
  for (int j = 0; j < nk; j += 4) {
    const int kb = nk - j < 4 ? nk - j : 4;
    __m512 acc[NQ][4];
    for (int b = 0; b < 4; ++b) {
      if (b >= kb) {
        for (int r = 0; r < NQ; ++r) acc[r][b] = _mm512_setzero_ps();
        continue;
      }
      __m512 kv[ND];
      for (int i = 0; i < ND; ++i) kv[i] = L::load(k[j + b], 16 * i, __mmask16(0xffff));
      for (int r = 0; r < NQ; ++r) {
        __m512 a = _mm512_fmadd_ps(qv[r][0], kv[0], _mm512_setzero_ps());
        for (int i = 1; i < ND; ++i) a = _mm512_fmadd_ps(qv[r][i], kv[i], a);
        acc[r][b] = a;
      }
    }
    for (int r = 0; r < NQ; ++r) {
      const __m128 sv = _mm_mul_ps(simd::sum_lanes4_512(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), vs);
      if (kb == 4) {
        _mm_storeu_ps(out[r] + j, sv);
      } else {
        alignas(16) float t[4];
        _mm_store_ps(t, sv);
        for (int b = 0; b < kb; ++b) out[r][j + b] = t[b];
      }
    }
  }
}

template <typename L, int ND>
void qk_regs_rows(const float* const* q, int nq, const void* const* k, int nk, float scale, float* const* out) {
  if constexpr (ND > 4) {  // two rows at a time keep the queries in 16 registers
    for (int r = 0; r < nq; r += 2) {
      if (nq - r >= 2) qk_regs<L, 2, ND>(q + r, k, nk, scale, out + r);
      else qk_regs<L, 1, ND>(q + r, k, nk, scale, out + r);
    }
  } else {
    switch (nq) {
      case 1: return qk_regs<L, 1, ND>(q, k, nk, scale, out);
      case 2: return qk_regs<L, 2, ND>(q, k, nk, scale, out);
      case 3: return qk_regs<L, 3, ND>(q, k, nk, scale, out);
      default: return qk_regs<L, 4, ND>(q, k, nk, scale, out);
    }
  }
}

template <typename L>
void qk_rows(const float* const* q, int nq, const void* const* k, int nk, int n, float scale, float* const* out) {
  switch (n) {
    case 32: qk_regs_rows<L, 2>(q, nq, k, nk, scale, out); return;
    case 64: qk_regs_rows<L, 4>(q, nq, k, nk, scale, out); return;
    case 128: qk_regs_rows<L, 8>(q, nq, k, nk, scale, out); return;
    default: break;
  }
  switch (nq) {
    case 1: return qk_n<L, 1>(q, k, nk, n, scale, out);
    case 2: return qk_n<L, 2>(q, k, nk, n, scale, out);
    case 3: return qk_n<L, 3>(q, k, nk, n, scale, out);
    default: return qk_n<L, 4>(q, k, nk, n, scale, out);
  }
}

// 64 output dims at a time: NR rows x 4 vectors of accumulators stay in registers while the
// chunk's keys stream by; each lane still accumulates in key order.
template <typename L, int NR>
void pv_n(float* const* acc, const float* const* w, const void* const* v, int nk, int n) {
  for (int d = 0; d < n; d += 64) {
    __mmask16 m[4];
    for (int b = 0; b < 4; ++b) m[b] = lanes_or_none(n - d - 16 * b);
    __m512 a[NR][4];
    for (int r = 0; r < NR; ++r)
      for (int b = 0; b < 4; ++b) a[r][b] = _mm512_maskz_loadu_ps(m[b], acc[r] + d + 16 * b);
    for (int j = 0; j < nk; ++j) {
      __m512 vv[4];
      for (int b = 0; b < 4; ++b) vv[b] = L::load(v[j], d + 16 * b, m[b]);
      for (int r = 0; r < NR; ++r) {
        const __m512 bw = _mm512_set1_ps(w[r][j]);
        for (int b = 0; b < 4; ++b) a[r][b] = _mm512_fmadd_ps(bw, vv[b], a[r][b]);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int b = 0; b < 4; ++b) _mm512_mask_storeu_ps(acc[r] + d + 16 * b, m[b], a[r][b]);
  }
}

template <typename L>
void pv_rows(float* const* acc, const float* const* w, int nr, const void* const* v, int nk, int n) {
  if constexpr (std::is_same_v<L, BF16>) {
    switch (nr) {
      case 1: return pv_n_bf16<1>(acc, w, v, nk, n);
      case 2: return pv_n_bf16<2>(acc, w, v, nk, n);
      case 3: return pv_n_bf16<3>(acc, w, v, nk, n);
      default: return pv_n_bf16<4>(acc, w, v, nk, n);
    }
  }
  switch (nr) {
    case 1: return pv_n<L, 1>(acc, w, v, nk, n);
    case 2: return pv_n<L, 2>(acc, w, v, nk, n);
    case 3: return pv_n<L, 3>(acc, w, v, nk, n);
    default: return pv_n<L, 4>(acc, w, v, nk, n);
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
    case DType::kF32: return {qk_rows<F32>, pv_rows<F32>, exp_sum};
    case DType::kF16: return {qk_rows<F16>, pv_rows<F16>, exp_sum};
    default: return {qk_rows<BF16>, pv_rows<BF16>, exp_sum};
  }
}

}  // namespace deepinfer::kernels::detail
