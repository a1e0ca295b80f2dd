// AVX-512 FP4 matmul: one 32-input block is 16 bytes; its nibbles are split and interleaved back
// into input order (unpacklo/hi), looked up as doubled int8 values with one byte shuffle, and
// widened to two vectors of 16 floats, then scaled (2^(s - 127) / 2: exact). Up to 8 input rows
// share each widened block; a partial last block uses masked loads.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/fp4_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 8;

// Inputs [i, i + n) of a row (n even, <= 32) from their n / 2 packed bytes.
inline void widen32(const uint8_t* w, int n, __m512& w0, __m512& w1) {
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Doubled));
  const __m128i mask4 = _mm_set1_epi8(0x0f);
  const __m128i b = n == 32 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(w))
                            : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (n / 2)) - 1), w);
  const __m128i lo = _mm_and_si128(b, mask4);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask4);
  const __m128i e0 = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi));
  const __m128i e1 = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi));
  w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(e0));
  w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(e1));
}

// _mm512_reduce_add_ps, spelled out: inside this template GCC 12 reports its intrinsic's
// deliberately undefined upper half as an uninitialized use (an error under -Werror).
inline float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, v, 0), _mm512_maskz_extractf32x8_ps(0xff, v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Output row `o` for input rows [r0, r0 + R): R accumulators, one widened block shared by all.
template <int R>
void rows_block(const Fp4MatmulParams& p, int64_t o, int64_t r0) {
  const uint8_t* w = p.weight + o * p.weight_row_bytes;
  const uint8_t* s = p.scale + o * p.scale_stride;
  const int64_t nb = (p.n_in + kFp4Block - 1) / kFp4Block;
  const float* x[R];
  // Few rows: two FMA chains per row, else FMA latency, not throughput, bounds them.
  constexpr bool kTwoChains = R <= 2;
  __m512 total[R], total1[R];
  for (int r = 0; r < R; ++r) {
    x[r] = p.input + (r0 + r) * p.input_stride;
    total[r] = total1[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t i = b * kFp4Block;
    const int n = static_cast<int>(std::min<int64_t>(kFp4Block, p.n_in - i));
    __m512 w0, w1;
    widen32(w + i / 2, n, w0, w1);
    // The scale is a power of two: folding it into the widened weights is exact.
    const __m512 sc = _mm512_set1_ps(ue8m0_to_float(s[b]) * 0.5f);
    w0 = _mm512_mul_ps(w0, sc);
    w1 = _mm512_mul_ps(w1, sc);
    if (n == kFp4Block) {
      for (int r = 0; r < R; ++r) {
        total[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i), w0, total[r]);
        __m512& t = kTwoChains ? total1[r] : total[r];
        t = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i + 16), w1, t);
      }
    } else {
      const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
      const __mmask16 m1 = n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
      for (int r = 0; r < R; ++r) {
        total[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, x[r] + i), w0, total[r]);
        __m512& t = kTwoChains ? total1[r] : total[r];
        t = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, x[r] + i + 16), w1, t);
      }
    }
  }
  for (int r = 0; r < R; ++r) p.output[(r0 + r) * p.output_stride + o] = hsum(_mm512_add_ps(total[r], total1[r]));
}

using RowsBlockFn = void (*)(const Fp4MatmulParams&, int64_t, int64_t);
constexpr RowsBlockFn kRowsBlock[kRows + 1] = {nullptr,        rows_block<1>, rows_block<2>,
                                               rows_block<3>,  rows_block<4>, rows_block<5>,
                                               rows_block<6>,  rows_block<7>, rows_block<8>};

}  // namespace

void fp4_matmul_rows_avx512(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; ++o)
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows)
      kRowsBlock[std::min<int64_t>(kRows, p.n_rows - r0)](p, o, r0);
}

}  // namespace deepinfer::kernels::detail
