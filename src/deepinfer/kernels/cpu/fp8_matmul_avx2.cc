// AVX2 + F16C FP8 block matmul: the AVX-512 variant's bit placement (e4m3 -> f16 with the
// exponent bias off by 8, folded into the block scale) on 8 weights at a time; block tails
// (n_in not a multiple of 8) go through the scalar table.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "deepinfer/kernels/cpu/fp8_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 4;

inline __m256 widen8(const uint8_t* w) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w)));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  const __m128i mag = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7);
  return _mm256_cvtph_ps(_mm_or_si128(sign, mag));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void fp8_matmul_rows_avx2(const Fp8MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const int64_t nb = (p.n_in + p.block - 1) / p.block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const float* s = p.scale_inv + (o / p.block) * p.scale_stride;
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, p.n_rows - r0));
      const float* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = p.input + (r0 + std::min(r, nr - 1)) * p.input_stride;
      float total[kRows] = {0, 0, 0, 0};
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i0 = b * p.block, i1 = std::min(p.n_in, i0 + p.block);
        __m256 acc[kRows];
        for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
        int64_t i = i0;
        for (; i + 8 <= i1; i += 8) {
          const __m256 wv = widen8(w + i);
          for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + i), wv, acc[r]);
        }
        float tail[kRows] = {0, 0, 0, 0};
        for (; i < i1; ++i) {
          const float wf = fp8_e4m3_to_float(w[i]) * (1.0f / 256.0f);  // same scale as the vector lanes
          for (int r = 0; r < kRows; ++r) tail[r] = std::fma(x[r][i], wf, tail[r]);
        }
        const float sc = s[b] * 256.0f;
        // FMAs as the lanes and the AVX-512 variant do (the build contracts nothing by itself).
        for (int r = 0; r < kRows; ++r) total[r] = std::fma(hsum(acc[r]) + tail[r], sc, total[r]);
      }
      for (int r = 0; r < nr; ++r) p.output[(r0 + r) * p.output_stride + o] = total[r];
    }
  }
}

}  // namespace deepinfer::kernels::detail
