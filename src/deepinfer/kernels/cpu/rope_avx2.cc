// AVX2 RoPE rotations from per-token cos/sin tables (scalar tails).
#include <immintrin.h>

#include <cmath>

#include "deepinfer/kernels/cpu/rope.h"

namespace deepinfer::kernels::detail {

void rope_half_avx2(float* x, const float* c, const float* s, int h) {
  int i = 0;
  for (; i + 8 <= h; i += 8) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + h);
    const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
    _mm256_storeu_ps(x + i, _mm256_fnmadd_ps(b, vs, _mm256_mul_ps(a, vc)));
    _mm256_storeu_ps(x + i + h, _mm256_fmadd_ps(a, vs, _mm256_mul_ps(b, vc)));
  }
  for (; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    // The vector lanes' FMAs, explicitly (kernels/cpu builds with -ffp-contract=off).
    x[i] = std::fma(-b, s[i], a * c[i]);
    x[i + h] = std::fma(a, s[i], b * c[i]);
  }
}

void rope_interleaved_avx2(float* x, const float* cd, const float* sd, int rot_dim) {
  int i = 0;
  for (; i + 8 <= rot_dim; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sw = _mm256_permute_ps(v, 0xB1);  // (x1, x0, x3, x2, ...)
    _mm256_storeu_ps(x + i, _mm256_fmadd_ps(sw, _mm256_loadu_ps(sd + i), _mm256_mul_ps(v, _mm256_loadu_ps(cd + i))));
  }
  for (; i < rot_dim; i += 2) {
    const float a = x[i], b = x[i + 1];
    x[i] = std::fma(b, sd[i], a * cd[i]);
    x[i + 1] = std::fma(a, sd[i + 1], b * cd[i + 1]);
  }
}

}  // namespace deepinfer::kernels::detail
