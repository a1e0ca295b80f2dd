// The ISA-independent part of the blocked kHigh kernel (matmul_high_block.h): dequantizing a
// column block into the scratch and walking register tiles over it. Included by matmul_avx2.cc
// and matmul_avx512.cc after matmul_simd_impl.h (high_chunk) and their ISA's part
// (matmul_high_block_{avx2,avx512}_impl.h), which defines kHighBlockDepth, kHighBlockRows,
// kHighBlockCols, high_block_store16 and the register tile high_block_tile<R, C>.

// Columns [col_begin, col_end) dequantized into scratch with exactly the weight values of
// matmul_high_tile.h, w = fma(d, float(q), m). Groups of kHighBlockCols columns (fewer in the
// last) are interleaved by 16 inputs, [group][n_in / 16][column of the group][16], so a
// register tile reads its weights as one sequential stream.
template <DType T>
void high_block_dequant(const HighBlock& b) {
  const int64_t nc = b.n_in / 32, nb = b.col_end - b.col_begin;
  for (int64_t lo = 0; lo < nb; ++lo) {
    const uint8_t* row = b.weight + (b.col_begin + lo) * b.weight_row_bytes;
    const int64_t g = lo / kHighBlockCols,
                  cols = std::min<int64_t>(kHighBlockCols, nb - g * kHighBlockCols);
    float* dst = b.scratch + g * kHighBlockCols * b.n_in + (lo % kHighBlockCols) * 16;
    for (int64_t c = 0; c < nc; ++c) {
      float d0, d1, mn;
      const __m256i q = high_chunk<T>(row, c, &d0, &d1, &mn);
      high_block_store16(dst + 2 * c * cols * 16, _mm256_castsi256_si128(q), d0, mn);
      high_block_store16(dst + (2 * c + 1) * cols * 16, _mm256_extracti128_si256(q, 1), d1, mn);
    }
  }
}

// The last group of a block, cols < kHighBlockCols columns wide.
template <int R, int C>
void high_block_tail_cols(const float* const* x, const float* w, int64_t k0, int64_t k1,
                          int64_t n_in, float* part, float* out, int64_t out_stride, int cols) {
  if constexpr (C > 0) {
    if (cols == C) return high_block_tile<R, C>(x, w, k0, k1, n_in, part, out, out_stride);
    high_block_tail_cols<R, C - 1>(x, w, k0, k1, n_in, part, out, out_stride, cols);
  }
}

// Rows [r0, r0 + R) over the whole column block, kHighBlockDepth inputs at a time so that the
// R activation rows of a depth slice stay in L1 while the scratch columns stream past them.
template <int R>
void high_block_rows(const HighBlock& b, int64_t r0) {
  const float* x[R];
  for (int r = 0; r < R; ++r) x[r] = b.act + (r0 + r) * b.act_stride;
  const int64_t n = b.n_in, nb = b.col_end - b.col_begin;
  const int64_t depth = n <= kHighBlockDepth * 3 / 2 ? n : kHighBlockDepth;
  float* out = b.out + r0 * b.out_stride + b.col_begin;
  float* part = b.scratch + nb * n;  // [nb][R][16]
  for (int64_t k0 = 0; k0 < n; k0 += depth) {
    const int64_t k1 = std::min(n, k0 + depth);
    int64_t c = 0;
    for (; c + kHighBlockCols <= nb; c += kHighBlockCols)
      high_block_tile<R, kHighBlockCols>(x, b.scratch + c * n + k0 * kHighBlockCols, k0, k1, n,
                                         part + c * R * 16, out + c, b.out_stride);
    if (c < nb)
      high_block_tail_cols<R, kHighBlockCols - 1>(x, b.scratch + c * n + k0 * (nb - c), k0, k1, n,
                                                  part + c * R * 16, out + c, b.out_stride,
                                                  static_cast<int>(nb - c));
  }
}

inline void high_block_dequant_any(const HighBlock& b) {
  switch (b.type) {
    case DType::kQ4_0:
      return high_block_dequant<DType::kQ4_0>(b);
    case DType::kQ4_1:
      return high_block_dequant<DType::kQ4_1>(b);
    case DType::kQ5_0:
      return high_block_dequant<DType::kQ5_0>(b);
    case DType::kQ5_1:
      return high_block_dequant<DType::kQ5_1>(b);
    case DType::kQ8_0:
      return high_block_dequant<DType::kQ8_0>(b);
    case DType::kQ4_K:
      return high_block_dequant<DType::kQ4_K>(b);
    case DType::kQ5_K:
      return high_block_dequant<DType::kQ5_K>(b);
    case DType::kQ6_K:
      return high_block_dequant<DType::kQ6_K>(b);
    default:
      DI_CHECK(false, "matmul kHigh block: unsupported weight type {}", dtype_name(b.type));
  }
}

// The last rows of the block, rows < kHighBlockRows of them.
template <int R>
void high_block_tail_rows(const HighBlock& b, int64_t r0, int rows) {
  if constexpr (R > 0) {
    if (rows == R) return high_block_rows<R>(b, r0);
    high_block_tail_rows<R - 1>(b, r0, rows);
  }
}

inline void high_block_simd(const HighBlock& b) {
  high_block_dequant_any(b);
  int64_t r = 0;
  for (; r + kHighBlockRows <= b.n_rows; r += kHighBlockRows) high_block_rows<kHighBlockRows>(b, r);
  if (r < b.n_rows) high_block_tail_rows<kHighBlockRows - 1>(b, r, static_cast<int>(b.n_rows - r));
}
