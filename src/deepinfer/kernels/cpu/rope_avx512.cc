// AVX-512 RoPE rotations from per-token cos/sin tables (masked tails).
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on _mm512_undefined_*(); harmless.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "deepinfer/kernels/cpu/rope.h"

namespace deepinfer::kernels::detail {

void rope_half_avx512(float* x, const float* c, const float* s, int h) {
  for (int i = 0; i < h; i += 16) {
    const __mmask16 m = h - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (h - i)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i), b = _mm512_maskz_loadu_ps(m, x + i + h);
    const __m512 vc = _mm512_maskz_loadu_ps(m, c + i), vs = _mm512_maskz_loadu_ps(m, s + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_fnmadd_ps(b, vs, _mm512_mul_ps(a, vc)));
    _mm512_mask_storeu_ps(x + i + h, m, _mm512_fmadd_ps(a, vs, _mm512_mul_ps(b, vc)));
  }
}

void rope_interleaved_avx512(float* x, const float* cd, const float* sd, int rot_dim) {
  for (int i = 0; i < rot_dim; i += 16) {
    const __mmask16 m = rot_dim - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (rot_dim - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 sw = _mm512_permute_ps(v, 0xB1);
    _mm512_mask_storeu_ps(x + i, m, _mm512_fmadd_ps(sw, _mm512_maskz_loadu_ps(m, sd + i),
                                                    _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, cd + i))));
  }
}

}  // namespace deepinfer::kernels::detail
