// The AVX-512 part of the blocked kHigh kernel (matmul_high_block.h), included by
// matmul_avx512.cc before the shared part (matmul_high_block_impl.h). One zmm accumulator per
// (row, column) is the reference's acc[16]: lane l takes element j of a chunk when
// j % 16 == l, chunks in order.

inline constexpr int64_t kHighBlockDepth = 512;  // inputs per pass: 6 rows x 2 KB of L1
inline constexpr int kHighBlockRows = 6;  // 6 x 4 accumulators + 4 weights + 1 input of 32 zmm
inline constexpr int kHighBlockCols = 4;

// dst[i] = fma(d, float(q[i]), m) for the 16 signed bytes of q: the weights of matmul_high_tile.h.
inline void high_block_store16(float* dst, __m128i q, float d, float m) {
  const __m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
  _mm512_store_ps(dst, _mm512_fmadd_ps(_mm512_set1_ps(d), qf, _mm512_set1_ps(m)));
}

// The reference's final sum of one accumulator: hsum8(acc[0..7] + acc[8..15]).
inline float high_block_sum(__m512 acc) {
  return hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1))));
}

// hsum8(a[0..7] + a[8..15]) of four accumulators at once, the same additions on the same
// operands as high_block_sum (float addition is commutative, so only pairing matters).
inline __m128 high_block_sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // [va, vb] and [vc, vd] with v[l] = acc[l] + acc[l + 8].
  const __m512 ab =
      _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd =
      _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  // u[l] = v[l] + v[l + 4] for l < 4: one 128-bit lane per accumulator, in order a, b, c, d.
  const __m512 u =
      _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  // (u0 + u2), (u1 + u3), then their sum, in lane 0 of each 128-bit lane.
  const __m512 s = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
  const __m512 t = _mm512_add_ps(s, _mm512_permute_ps(s, 0xB1));
  const __m512i lane0s = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0s, t));
}

// R rows x C columns of outputs from a group of C interleaved scratch columns: per 16 inputs,
// C weight loads and R activation loads feed R * C FMAs.
template <int R, int C, bool kFirst>
inline void high_block_step(__m512 (&acc)[R][C], const float* const* x, const float* w, int64_t k0,
                            int64_t k) {
  __m512 wv[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) wv[c] = _mm512_load_ps(w + ((k - k0) * C + 16 * c));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 xv = _mm512_loadu_ps(x[r] + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r][c] = _mm512_fmadd_ps(wv[c], xv, kFirst ? _mm512_setzero_ps() : acc[r][c]);
  }
}

// Inputs [k0, k1) of an R x C tile. A tile that does not start at input 0 resumes from the
// accumulators saved in `part` ([R][C][16]); one that does not end at n_in saves them there
// (storing and reloading a float is exact, so the split changes no bit).
template <int R, int C>
void high_block_tile(const float* const* x, const float* w, int64_t k0, int64_t k1, int64_t n_in,
                     float* part, float* out, int64_t out_stride) {
  __m512 acc[R][C];
  int64_t k = k0;
  if (k0 == 0) {
    // The first step FMAs into zero (as the reference does) instead of zeroing acc beforehand:
    // GCC turns a zeroing loop into a memset and then keeps acc on the stack.
    high_block_step<R, C, true>(acc, x, w, k0, k0);
    k += 16;
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_load_ps(part + 16 * (r * C + c));
  }
  for (; k < k1; k += 16) high_block_step<R, C, false>(acc, x, w, k0, k);
  if (k1 < n_in) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) _mm512_store_ps(part + 16 * (r * C + c), acc[r][c]);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c + 4 <= C; c += 4)
      _mm_storeu_ps(out + r * out_stride + c,
                    high_block_sum4(acc[r][c], acc[r][c + 1], acc[r][c + 2], acc[r][c + 3]));
#pragma GCC unroll 8
    for (int c = C / 4 * 4; c < C; ++c) out[r * out_stride + c] = high_block_sum(acc[r][c]);
  }
}
