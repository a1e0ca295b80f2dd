// AVX2 row dequantizers. Same float operations as the scalar code (q*d, then + m; no FMA), so
// the results are bit-identical to tensor/quant.cc.
#include <immintrin.h>

#include <cstring>

#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/dequantize.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::dequantize_detail {
namespace {

// 16 bytes of nibbles -> elements 0..15 (low nibbles) and 16..31 (high nibbles) as int32 x4.
inline void nibbles_to_ps(const uint8_t* qs, __m256 out[4], int offset) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0xF), off = _mm_set1_epi8(static_cast<char>(offset));
  const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, m4), off);
  const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), m4), off);
  out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
  out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
  out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
  out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

}  // namespace

bool dequantize_avx2(DType type, const void* src, float* y, int64_t n) {
  switch (type) {
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      for (; i < n; ++i) y[i] = f16_to_f32(h[i]);
      return true;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      for (; i < n; ++i) y[i] = bf16_to_f32(h[i]);
      return true;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        for (int k = 0; k < 4; ++k) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));
          _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
      return true;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      __m256 v[4];
      for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        nibbles_to_ps(b[i].qs, v, 8);
        for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(v[k], d));
      }
      return true;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      __m256 v[4];
      for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d)), m = _mm256_set1_ps(_cvtsh_ss(b[i].m));
        nibbles_to_ps(b[i].qs, v, 0);
        for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(v[k], d), m));
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace deepinfer::kernels::dequantize_detail
