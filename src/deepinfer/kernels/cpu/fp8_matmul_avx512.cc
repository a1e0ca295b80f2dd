// AVX-512 FP8 block matmul: 16 e4m3 bytes widen to f16 by bit placement (the e4m3 exponent
// field lands in f16's with bias 15 instead of 7, subnormals included), then to f32 with
// vcvtph2ps; the 2^8 bias correction folds into the block scale. Up to 4 input rows share each
// widened weight vector.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/fp8_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 4;

inline __m512 widen16(const uint8_t* w, __mmask16 m) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, w));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), 7);
  return _mm512_cvtph_ps(_mm256_or_si256(sign, mag));
}

}  // namespace

void fp8_matmul_rows_avx512(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const int64_t nb = (p.n_in + p.block - 1) / p.block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const float* s = p.scale_inv + (o / p.block) * p.scale_stride;
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, p.n_rows - r0));
      const float* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = p.input + (r0 + std::min(r, nr - 1)) * p.input_stride;
      __m512 total[kRows];
      for (int r = 0; r < kRows; ++r) total[r] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i0 = b * p.block, i1 = std::min(p.n_in, i0 + p.block);
        __m512 acc[kRows];
        for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
        for (int64_t i = i0; i < i1; i += 16) {
          const int n = static_cast<int>(std::min<int64_t>(16, i1 - i));
          const __mmask16 m = n == 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
          const __m512 wv = widen16(w + i, m);
          for (int r = 0; r < kRows; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x[r] + i), wv, acc[r]);
        }
        const __m512 sc = _mm512_set1_ps(s[b] * 256.0f);
        for (int r = 0; r < kRows; ++r) total[r] = _mm512_fmadd_ps(acc[r], sc, total[r]);
      }
      for (int r = 0; r < nr; ++r) p.output[(r0 + r) * p.output_stride + o] = _mm512_reduce_add_ps(total[r]);
    }
  }
}

}  // namespace deepinfer::kernels::detail
