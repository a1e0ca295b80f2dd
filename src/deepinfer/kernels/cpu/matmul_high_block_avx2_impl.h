// The AVX2 part of the blocked kHigh kernel (matmul_high_block.h), included by matmul_avx2.cc
// before the shared part (matmul_high_block_impl.h). Each (row, column) has two ymm
// accumulators, lo and hi, that are exactly the reference's acc[0..7] and acc[8..15] (as in
// tile_high): of every 16 weights of the scratch, the first 8 go to lo and the next 8 to hi.

inline constexpr int64_t kHighBlockDepth = 512;  // inputs per pass: 3 rows x 2 KB of L1
// 3 x 2 x 2 accumulators + 2 weights + 1 input of 16 ymm: the two halves of a 16-input step
// run one after the other, so only one half's weights are live at a time.
inline constexpr int kHighBlockRows = 3;
inline constexpr int kHighBlockCols = 2;

// dst[i] = fma(d, float(q[i]), m) for the 16 signed bytes of q: the weights of matmul_high_tile.h.
inline void high_block_store16(float* dst, __m128i q, float d, float m) {
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  const __m256 q0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  const __m256 q1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
  _mm256_store_ps(dst, _mm256_fmadd_ps(vd, q0, vm));
  _mm256_store_ps(dst + 8, _mm256_fmadd_ps(vd, q1, vm));
}

// The reference's final sum of one output: hsum8(acc[0..7] + acc[8..15]).
inline float high_block_sum(__m256 lo, __m256 hi) { return hsum_ps(_mm256_add_ps(lo, hi)); }

// R rows x C columns of outputs from a group of C interleaved scratch columns: per 16 inputs
// and per half, C weight loads and R activation loads feed R * C FMAs.
template <int R, int C, bool kFirst>
inline void high_block_step(__m256 (&acc)[R][C][2], const float* const* x, const float* w,
                            int64_t k0, int64_t k) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256 wv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) wv[c] = _mm256_load_ps(w + ((k - k0) * C + 16 * c + 8 * h));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x[r] + k + 8 * h);
      // Keeps xv in a register: GCC would otherwise fold the load into each of the C FMAs, and
      // 16 loads per 12 FMAs instead of 10 measured 25-40% slower (3x2 tile, q4_1 n_in 576).
      __asm__("" : "+x"(xv));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[r][c][h] = _mm256_fmadd_ps(wv[c], xv, kFirst ? _mm256_setzero_ps() : acc[r][c][h]);
    }
  }
}

// Inputs [k0, k1) of an R x C tile. A tile that does not start at input 0 resumes from the
// accumulators saved in `part` ([R][C][16], lo then hi); one that does not end at n_in saves
// them there (storing and reloading a float is exact, so the split changes no bit).
template <int R, int C>
void high_block_tile(const float* const* x, const float* w, int64_t k0, int64_t k1, int64_t n_in,
                     float* part, float* out, int64_t out_stride) {
  __m256 acc[R][C][2];
  int64_t k = k0;
  if (k0 == 0) {
    // FMAs into zero rather than a zeroing loop, which GCC makes a memset of (acc on the stack).
    high_block_step<R, C, true>(acc, x, w, k0, k0);
    k += 16;
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) acc[r][c][h] = _mm256_load_ps(part + 16 * (r * C + c) + 8 * h);
  }
  for (; k < k1; k += 16) high_block_step<R, C, false>(acc, x, w, k0, k);
  if (k1 < n_in) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) _mm256_store_ps(part + 16 * (r * C + c) + 8 * h, acc[r][c][h]);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      out[r * out_stride + c] = high_block_sum(acc[r][c][0], acc[r][c][1]);
}
