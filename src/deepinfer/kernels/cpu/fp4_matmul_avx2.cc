// AVX2 FP4 matmul: the AVX-512 variant's widening (nibbles interleaved into input order, doubled
// int8 values by byte shuffle, sign-extended to int32, converted, scaled) as four vectors of 8
// floats per 32-input block. A partial last block (n_in not a multiple of 32) goes through the
// scalar decode with the same doubled values and scale.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/fp4_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 4;

inline __m256 widen8(__m128i e) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void fp4_matmul_rows_avx2(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end) {
  const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Doubled));
  const __m128i mask4 = _mm_set1_epi8(0x0f);
  const int64_t full = p.n_in / kFp4Block;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* w = p.weight + o * p.weight_row_bytes;
    const uint8_t* s = p.scale + o * p.scale_stride;
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, p.n_rows - r0));
      const float* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = p.input + (r0 + std::min(r, nr - 1)) * p.input_stride;
      __m256 total[kRows];
      for (int r = 0; r < kRows; ++r) total[r] = _mm256_setzero_ps();
      for (int64_t b = 0; b < full; ++b) {
        const int64_t i = b * kFp4Block;
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i / 2));
        const __m128i lo = _mm_and_si128(bytes, mask4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask4);
        const __m128i e0 = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi));
        const __m128i e1 = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi));
        // The scale is a power of two: folding it into the widened weights is exact.
        const __m256 sc = _mm256_set1_ps(ue8m0_to_float(s[b]) * 0.5f);
        const __m256 w0 = _mm256_mul_ps(widen8(e0), sc),
                     w1 = _mm256_mul_ps(widen8(_mm_srli_si128(e0, 8)), sc);
        const __m256 w2 = _mm256_mul_ps(widen8(e1), sc),
                     w3 = _mm256_mul_ps(widen8(_mm_srli_si128(e1, 8)), sc);
        for (int r = 0; r < kRows; ++r) {
          const float* xr = x[r] + i;
          // Two chains per row: FMA latency, not throughput, would bound the one-row case.
          const __m256 a =
              _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), w1, _mm256_mul_ps(_mm256_loadu_ps(xr), w0));
          const __m256 c = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 24), w3,
                                           _mm256_mul_ps(_mm256_loadu_ps(xr + 16), w2));
          total[r] = _mm256_add_ps(total[r], _mm256_add_ps(a, c));
        }
      }
      float tail[kRows] = {0, 0, 0, 0};
      if (full * kFp4Block < p.n_in) {
        const float sc = ue8m0_to_float(s[full]) * 0.5f;
        for (int r = 0; r < kRows; ++r) {
          float acc = 0.0f;
          for (int64_t i = full * kFp4Block; i < p.n_in; i += 2) {
            const uint8_t byte = w[i / 2];
            acc += x[r][i] * kFp4Doubled[byte & 0xf] + x[r][i + 1] * kFp4Doubled[byte >> 4];
          }
          tail[r] = acc * sc;
        }
      }
      for (int r = 0; r < nr; ++r)
        p.output[(r0 + r) * p.output_stride + o] = hsum(total[r]) + tail[r];
    }
  }
}

}  // namespace deepinfer::kernels::detail
