// AVX-512 build of quantize_act_q8_32: the scalar quantizer's values bit for bit (same absmax,
// scale, product and round-half-away-from-zero), 16 lanes at a time.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "deepinfer/kernels/cpu/quantize_activation.h"

namespace deepinfer::kernels {
namespace {

// std::round of each lane: truncate, then step away from zero when the dropped fraction (exact
// for |v| < 2^23, and larger floats are integers already) is at least one half.
inline __m512i round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512i ti = _mm512_cvttps_epi32(t);
  const __m512i step = _mm512_mask_blend_epi32(_mm512_movepi32_mask(_mm512_castps_si512(v)),
                                               _mm512_set1_epi32(1), _mm512_set1_epi32(-1));
  return _mm512_mask_add_epi32(ti, up, ti, step);
}

}  // namespace

void quantize_act_q8_32_avx512(const float* x, ActBlock32* out, int64_t n, ActSign sign) {
  const __m128i bias = _mm_set1_epi8(static_cast<char>(sign == ActSign::kUnsigned ? 128 : 0));
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    // max is exact and order-free, so this is the scalar loop's fmax over |x| (inputs not NaN).
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = round_away(_mm512_mul_ps(x0, vid)), q1 = round_away(_mm512_mul_ps(x1, vid));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs),
                     _mm_add_epi8(_mm512_cvtepi32_epi8(q0), bias));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16),
                     _mm_add_epi8(_mm512_cvtepi32_epi8(q1), bias));
    out[b].d = d;
    out[b].sum = sum;
    out[b].dsum = d * static_cast<float>(sum);
    out[b].pad = 0;
  }
}

}  // namespace deepinfer::kernels
