// AVX-512 FP4 matmul: one 32-input block is 16 bytes; its nibbles are split and interleaved back
// into input order (unpacklo/hi), looked up as doubled int8 values with one byte shuffle, and
// widened to two vectors of 16 floats. The 1/2 of the doubled values folds into the block scale.
// Up to 4 input rows share each widened block; a partial last block uses masked loads.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/fp4_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 4;

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

}  // namespace

void fp4_matmul_rows_avx512(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const int64_t nb = (p.n_in + kFp4Block - 1) / kFp4Block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const uint8_t* s = p.scale + o * p.scale_stride;
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, p.n_rows - r0));
      const float* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = p.input + (r0 + std::min(r, nr - 1)) * p.input_stride;
      __m512 total[kRows];
      for (int r = 0; r < kRows; ++r) total[r] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i = b * kFp4Block;
        const int n = static_cast<int>(std::min<int64_t>(kFp4Block, p.n_in - i));
        __m512 w0, w1;
        widen32(w + i / 2, n, w0, w1);
        const __m512 sc = _mm512_set1_ps(ue8m0_to_float(s[b]) * 0.5f);
        if (n == kFp4Block) {
          for (int r = 0; r < kRows; ++r) {
            const __m512 acc = _mm512_fmadd_ps(_mm512_loadu_ps(x[r] + i + 16), w1,
                                               _mm512_mul_ps(_mm512_loadu_ps(x[r] + i), w0));
            total[r] = _mm512_fmadd_ps(acc, sc, total[r]);
          }
        } else {
          const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
          const __mmask16 m1 = n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
          for (int r = 0; r < kRows; ++r) {
            const __m512 acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, x[r] + i + 16), w1,
                                               _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, x[r] + i), w0));
            total[r] = _mm512_fmadd_ps(acc, sc, total[r]);
          }
        }
      }
      for (int r = 0; r < nr; ++r) p.output[(r0 + r) * p.output_stride + o] = _mm512_reduce_add_ps(total[r]);
    }
  }
}

}  // namespace deepinfer::kernels::detail
