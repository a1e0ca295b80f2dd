// AVX-512 FP4 matmul: one 32-input block is 16 bytes; its nibbles are split and interleaved back
// into input order (unpacklo/hi), looked up as doubled int8 values with one byte shuffle, and
// widened to two vectors of 16 floats, then scaled (2^(s - 127) / 2: exact). Tiles of 2 output
// rows x up to 8 input rows share each widened block and each input load; a partial last block
// uses masked loads. A row's arithmetic does not depend on the tile it lands in.
#include <immintrin.h>

#include <algorithm>

#include "deepinfer/kernels/cpu/fp4_matmul.h"

namespace deepinfer::kernels::detail {
namespace {

constexpr int kRows = 8;  // 2 x 8 tiles: 16 of the 32 vector registers hold accumulators

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
  const __m256 h = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, v, 0),
                                 _mm512_maskz_extractf32x8_ps(0xff, v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Output rows [o0, o0 + O) for input rows [r0, r0 + R): O widened blocks at a time, each input
// load shared by the O rows, each widened block by the R rows.
template <int O, int R>
void tile(const Fp4MatmulParams& p, int64_t o0, int64_t r0) {
  const int64_t nb = (p.n_in + kFp4Block - 1) / kFp4Block;
  // One FMA chain per (output, input) pair whatever the tile, so a row's rounding does not depend
  // on how many rows share its call (batch invariance); pairs of output rows keep two chains
  // going even for one input row, which FMA latency would otherwise bound.
  const float* x[R];
  __m512 acc[O][R];
  for (int r = 0; r < R; ++r) x[r] = p.input + (r0 + r) * p.input_stride;
  for (int o = 0; o < O; ++o)
    for (int r = 0; r < R; ++r) acc[o][r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t i = b * kFp4Block;
    const int n = static_cast<int>(std::min<int64_t>(kFp4Block, p.n_in - i));
    __m512 w0[O], w1[O];
    for (int o = 0; o < O; ++o) {
      widen32(p.weight + (o0 + o) * p.weight_row_bytes + i / 2, n, w0[o], w1[o]);
      // The scale is a power of two: folding it into the widened weights is exact.
      const __m512 sc =
          _mm512_set1_ps(ue8m0_to_float(p.scale[(o0 + o) * p.scale_stride + b]) * 0.5f);
      w0[o] = _mm512_mul_ps(w0[o], sc);
      w1[o] = _mm512_mul_ps(w1[o], sc);
    }
    const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    const __mmask16 m1 = n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
    for (int r = 0; r < R; ++r) {
      const __m512 x0 =
          n == kFp4Block ? _mm512_loadu_ps(x[r] + i) : _mm512_maskz_loadu_ps(m0, x[r] + i);
      const __m512 x1 = n == kFp4Block ? _mm512_loadu_ps(x[r] + i + 16)
                                       : _mm512_maskz_loadu_ps(m1, x[r] + i + 16);
      for (int o = 0; o < O; ++o) {
        acc[o][r] = _mm512_fmadd_ps(x0, w0[o], acc[o][r]);
        acc[o][r] = _mm512_fmadd_ps(x1, w1[o], acc[o][r]);
      }
    }
  }
  for (int o = 0; o < O; ++o)
    for (int r = 0; r < R; ++r)
      p.output[(r0 + r) * p.output_stride + o0 + o] = hsum(acc[o][r]);
}

using TileFn = void (*)(const Fp4MatmulParams&, int64_t, int64_t);
template <int O>
constexpr TileFn kTiles[kRows + 1] = {nullptr,    tile<O, 1>, tile<O, 2>, tile<O, 3>, tile<O, 4>,
                                      tile<O, 5>, tile<O, 6>, tile<O, 7>, tile<O, 8>};

}  // namespace

void fp4_matmul_rows_avx512(const Fp4MatmulParams& p, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; o += 2) {
    const bool pair = o + 1 < o_end;
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kRows) {
      const int64_t nr = std::min<int64_t>(kRows, p.n_rows - r0);
      (pair ? kTiles<2> : kTiles<1>)[nr](p, o, r0);
    }
  }
}

}  // namespace deepinfer::kernels::detail
