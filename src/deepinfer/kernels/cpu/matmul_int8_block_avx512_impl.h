// The blocked kInt8 kernel (matmul_int8_block.h) for AVX-512 VNNI. Included by matmul_avx512.cc
// inside its anonymous namespace after matmul_simd_impl.h (the Dec* decoders, hsum_ps).
//
// Batch invariance: per (row, column) this does what tile_q32 does. A 512-bit vpdpbusd over
// two columns' blocks against the row's block broadcast to both halves gives each column the
// 8 int32 lanes of the tile's 256-bit one (exact integers); the float lanes then go through the
// tile's sequence: blocks in pairs, acc + fma(I1, s1, I0 * s0) with s = d_w * d_a, a single
// block last as fma(I0, s0, acc), hsum_ps, plus the min term (or 0) summed the tile's way.

inline constexpr int kInt8BlockRows = 4;   // rows x pairs accumulators: 16 of the 32 zmm
inline constexpr int kInt8BlockPairs = 4;  // column pairs per register tile (8 columns)

// Column `lo` of the block into the scratch: its half of the pair's blocks and its mins.
template <typename Dec>
void int8_block_unpack_col(const Int8Block& b, int64_t lo) {
  using B = typename Dec::B;
  const int64_t nk = b.n_in / 32;
  const B* wb = reinterpret_cast<const B*>(b.weight + (b.col_begin + lo) * b.weight_row_bytes);
  uint8_t* pair = b.scratch + (lo / 2) * nk * kInt8PairBlockBytes + (lo % 2) * 32;
  const int64_t npairs = (b.col_end - b.col_begin + 1) / 2;
  float* mins = reinterpret_cast<float*>(b.scratch + npairs * nk * kInt8PairBlockBytes) +
                (lo / 16) * nk * 16 + lo % 16;
  const __m256i zero = _mm256_setzero_si256(), x80 = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t k = 0; k < nk; ++k) {
    uint8_t* dst = pair + k * kInt8PairBlockBytes;
    const __m256i w = Dec::q(wb + k);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst), w);
    // prepare_block's correction: activations are stored + 128 (unused by the _1 types).
    if constexpr (Dec::kSigned)
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 64),
                         _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, x80, w)));
    _mm256_store_ps(reinterpret_cast<float*>(dst + 128), _mm256_set1_ps(h2f(wb[k].d)));
    if constexpr (!Dec::kSigned) mins[k * 16] = Dec::m(wb + k);
  }
}

// A column pair's exact int32 lanes for one activation block, as floats. Signed weights: the
// activation bytes are stored + 128, corrected by the pair's aux lanes. The _1 types' weights
// are unsigned: then they are vpdpbusd's unsigned operand against the activations made signed
// again (a ^ 0x80, see int8_block_act), starting from zero (no copy of aux per row).
template <bool kSigned>
inline __m512 int8_block_int(const uint8_t* pb, __m512i a) {
  const __m512i w = _mm512_load_si512(pb);
  if constexpr (kSigned)
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_load_si512(pb + 64), a, w));
  else
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a));
}
inline __m512 int8_block_scale(const uint8_t* pb, __m512 da) {
  return _mm512_mul_ps(_mm512_load_ps(pb + 128), da);
}

template <bool kSigned>
inline __m512i int8_block_act(const ActBlock32& a) {
  const __m512i v =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)));
  return kSigned ? v : _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
}

// Rows [r0, r0 + R) times the C column pairs starting at pair p0 (columns 2 p0 .. 2 p0 + 2C of
// the block, of which `cols` are real), over all n_in inputs.
template <bool kSigned, int R, int C>
void int8_block_tile(const Int8Block& b, int64_t r0, int64_t p0, int cols) {
  const int64_t nk = b.n_in / 32;
  const uint8_t* pairs = b.scratch + p0 * nk * kInt8PairBlockBytes;
  const ActBlock32* a[R];
  for (int r = 0; r < R; ++r)
    a[r] = reinterpret_cast<const ActBlock32*>(b.act + (r0 + r) * b.act_row_bytes);
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 2 <= nk; k += 2) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i a0 = int8_block_act<kSigned>(a[r][k]),
                    a1 = int8_block_act<kSigned>(a[r][k + 1]);
      const __m512 da0 = _mm512_set1_ps(a[r][k].d), da1 = _mm512_set1_ps(a[r][k + 1].d);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const uint8_t* pb = pairs + (c * nk + k) * kInt8PairBlockBytes;
        const __m512 d0 = _mm512_mul_ps(int8_block_int<kSigned>(pb, a0), int8_block_scale(pb, da0));
        const uint8_t* pb1 = pb + kInt8PairBlockBytes;
        acc[r][c] = _mm512_add_ps(acc[r][c], _mm512_fmadd_ps(int8_block_int<kSigned>(pb1, a1),
                                                             int8_block_scale(pb1, da1), d0));
      }
    }
  }
  if (k < nk) {
    for (int r = 0; r < R; ++r) {
      const __m512i a0 = int8_block_act<kSigned>(a[r][k]);
      const __m512 da0 = _mm512_set1_ps(a[r][k].d);
      for (int c = 0; c < C; ++c) {
        const uint8_t* pb = pairs + (c * nk + k) * kInt8PairBlockBytes;
        acc[r][c] =
            _mm512_fmadd_ps(int8_block_int<kSigned>(pb, a0), int8_block_scale(pb, da0), acc[r][c]);
      }
    }
  }
  float* out = b.out + r0 * b.out_stride + b.col_begin + 2 * p0;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const __m256 lo = _mm512_castps512_ps256(acc[r][c]),
                   hi = _mm512_extractf32x8_ps(acc[r][c], 1);
      // The tile adds its min term m, 0 for the signed types (not a no-op: -0 + 0 = +0); the
      // unsigned types get theirs in int8_block_mins.
      if (2 * c < cols) out[r * b.out_stride + 2 * c] = kSigned ? hsum_ps(lo) + 0.0f : hsum_ps(lo);
      if (2 * c + 1 < cols)
        out[r * b.out_stride + 2 * c + 1] = kSigned ? hsum_ps(hi) + 0.0f : hsum_ps(hi);
    }
}

// R rows of the _1 types' min terms for the 16 columns of group g, added to the outputs:
// tile_q32's macc lane. R independent chains, so the add latency does not bound the pass.
template <int R>
void int8_block_mins_rows(const Int8Block& b, const float* m, int64_t r0, int64_t g) {
  const int64_t nk = b.n_in / 32, nc = b.col_end - b.col_begin;
  const ActBlock32* a[R];
  for (int r = 0; r < R; ++r)
    a[r] = reinterpret_cast<const ActBlock32*>(b.act + (r0 + r) * b.act_row_bytes);
  __m512 macc[R];
  for (int r = 0; r < R; ++r) macc[r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 2 <= nk; k += 2) {
    const __m512 m0 = _mm512_load_ps(m + k * 16), m1 = _mm512_load_ps(m + (k + 1) * 16);
    for (int r = 0; r < R; ++r) {
      const __m512 mt = _mm512_mul_ps(m0, _mm512_set1_ps(a[r][k].dsum));
      macc[r] = _mm512_add_ps(macc[r], _mm512_fmadd_ps(m1, _mm512_set1_ps(a[r][k + 1].dsum), mt));
    }
  }
  if (k < nk)
    for (int r = 0; r < R; ++r)
      macc[r] = _mm512_fmadd_ps(_mm512_load_ps(m + k * 16), _mm512_set1_ps(a[r][k].dsum), macc[r]);
  const int64_t n = std::min<int64_t>(16, nc - g * 16);
  const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
  for (int r = 0; r < R; ++r) {
    float* out = b.out + (r0 + r) * b.out_stride + b.col_begin + g * 16;
    _mm512_mask_storeu_ps(out, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, out), macc[r]));
  }
}

inline void int8_block_mins(const Int8Block& b) {
  const int64_t nk = b.n_in / 32, nc = b.col_end - b.col_begin;
  const float* mins =
      reinterpret_cast<const float*>(b.scratch + (nc + 1) / 2 * nk * kInt8PairBlockBytes);
  // Rows outermost: the 4 rows' activations stay in L1 while the block's mins (nc * n_in / 8
  // bytes, in L1 too) pass by.
  const int64_t ng = (nc + 15) / 16;
  int64_t r = 0;
  for (; r + 4 <= b.n_rows; r += 4)
    for (int64_t g = 0; g < ng; ++g) int8_block_mins_rows<4>(b, mins + g * nk * 16, r, g);
  for (; r < b.n_rows; ++r)
    for (int64_t g = 0; g < ng; ++g) int8_block_mins_rows<1>(b, mins + g * nk * 16, r, g);
}

// The last pairs of the block (fewer than kInt8BlockPairs), then the last rows.
template <bool kSigned, int R, int C>
void int8_block_tail_pairs(const Int8Block& b, int64_t r0, int64_t p0, int pairs, int cols) {
  if constexpr (C > 0) {
    if (pairs == C) return int8_block_tile<kSigned, R, C>(b, r0, p0, cols);
    int8_block_tail_pairs<kSigned, R, C - 1>(b, r0, p0, pairs, cols);
  }
}
template <bool kSigned, int R>
void int8_block_pairs(const Int8Block& b, int64_t r0, int64_t p0, int pairs, int cols) {
  if (pairs == kInt8BlockPairs)
    return int8_block_tile<kSigned, R, kInt8BlockPairs>(b, r0, p0, cols);
  int8_block_tail_pairs<kSigned, R, kInt8BlockPairs - 1>(b, r0, p0, pairs, cols);
}
template <bool kSigned, int R>
void int8_block_tail_rows(const Int8Block& b, int64_t r0, int rows, int64_t p0, int pairs,
                          int cols) {
  if constexpr (R > 0) {
    if (rows == R) return int8_block_pairs<kSigned, R>(b, r0, p0, pairs, cols);
    int8_block_tail_rows<kSigned, R - 1>(b, r0, rows, p0, pairs, cols);
  }
}

// Pair tiles outermost: a tile's scratch (C pairs x n_in x 3 bytes) stays in L1 while the
// rows' activations stream past it.
template <typename Dec>
void int8_block_simd(const Int8Block& b) {
  const int64_t nc = b.col_end - b.col_begin, nk = b.n_in / 32;
  if (nc % 2)
    std::memset(b.scratch + (nc / 2) * nk * kInt8PairBlockBytes, 0, nk * kInt8PairBlockBytes);
  for (int64_t lo = 0; lo < nc; ++lo) int8_block_unpack_col<Dec>(b, lo);
  const int64_t npairs = (nc + 1) / 2;
  for (int64_t p0 = 0; p0 < npairs; p0 += kInt8BlockPairs) {
    const int pairs = static_cast<int>(std::min<int64_t>(kInt8BlockPairs, npairs - p0));
    const int cols = static_cast<int>(std::min<int64_t>(2 * kInt8BlockPairs, nc - 2 * p0));
    int64_t r = 0;
    for (; r + kInt8BlockRows <= b.n_rows; r += kInt8BlockRows)
      int8_block_pairs<Dec::kSigned, kInt8BlockRows>(b, r, p0, pairs, cols);
    if (r < b.n_rows)
      int8_block_tail_rows<Dec::kSigned, kInt8BlockRows - 1>(b, r, static_cast<int>(b.n_rows - r),
                                                             p0, pairs, cols);
  }
  if constexpr (!Dec::kSigned) int8_block_mins(b);
}

inline void int8_block_any(const Int8Block& b) {
  switch (b.type) {
    case DType::kQ4_0:
      return int8_block_simd<DecQ4_0>(b);
    case DType::kQ4_1:
      return int8_block_simd<DecQ4_1>(b);
    case DType::kQ5_0:
      return int8_block_simd<DecQ5_0>(b);
    case DType::kQ5_1:
      return int8_block_simd<DecQ5_1>(b);
    case DType::kQ8_0:
      return int8_block_simd<DecQ8_0>(b);
    default:
      DI_CHECK(false, "matmul int8 block: unsupported weight type {}", dtype_name(b.type));
  }
}
