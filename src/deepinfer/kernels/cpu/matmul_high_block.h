// Internal to matmul's kHigh mode for many rows: a block of output columns is dequantized to
// fp32 once into a scratch that stays in cache, then every row passes over it in register
// tiles (rows x columns of accumulators), instead of decoding each weight chunk once per tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels::matmul_detail {

// From this many rows matmul uses the blocked kernel (AVX2 and AVX-512). Up to 8 rows the
// AVX-512 per-tile decode (matmul_high_simd_impl.h) covers them all with one decode of each
// chunk in registers and measured ~5% faster (q4_1 1536x576); from 9 rows it needs two. On
// AVX2 (4-row tiles) the blocked kernel measured no faster at 5-8 rows either.
inline constexpr int64_t kHighBlockMinRows = 9;
// fp32 scratch per column block: half of L2, so the activations of a row tile stay near too.
inline constexpr size_t kHighBlockScratchBytes = 96 * 1024;

// Rows per pass over all column blocks: their activations (768 KB) stay in L2 while each
// block's weights are dequantized once per pass (a multiple of 24, the tile heights' multiple).
inline constexpr size_t kHighBlockActBytes = 768 * 1024;
inline int64_t high_block_row_chunk(int64_t n_in) {
  const int64_t rows =
      static_cast<int64_t>(kHighBlockActBytes / (sizeof(float) * static_cast<size_t>(n_in)));
  return rows < 24 ? 24 : rows / 24 * 24;
}

// Output columns per block for rows of n_in inputs (a multiple of 4, at least 4).
inline int64_t high_block_cols(int64_t n_in) {
  const int64_t cols =
      static_cast<int64_t>(kHighBlockScratchBytes / (sizeof(float) * static_cast<size_t>(n_in)));
  return cols < 4 ? 4 : cols / 4 * 4;
}

// Scratch floats for a block of `cols` columns: the dequantized weights, then room to park
// the accumulators of a register tile of up to 8 rows (16 floats per output) between passes
// over the inputs.
inline size_t high_block_scratch_floats(int64_t cols, int64_t n_in) {
  return static_cast<size_t>(cols * n_in + cols * 8 * 16);
}

struct HighBlock {
  DType type;             // a quantized type the kHigh tiles support
  const uint8_t* weight;  // row 0 of the weight matrix
  size_t weight_row_bytes;
  int64_t n_in;                // multiple of 32
  int64_t col_begin, col_end;  // this block's output columns
  const float* act;            // [n_rows, n_in], rows act_stride floats apart
  int64_t act_stride;
  int64_t n_rows;
  float* out;  // [n_rows, out_stride], column 0 of row 0
  int64_t out_stride;
  float* scratch;  // high_block_scratch_floats(col_end - col_begin, n_in), 64-byte aligned
};

// Same bits as compute_high_tile_scalar for every (row, column): the weight values and each
// output's accumulation order are those fixed in matmul_high_tile.h (a 16-lane accumulator is
// exactly the reference's acc[16]), so rows may go through either path (batch invariance).
void compute_high_block_avx2(const HighBlock& b);
void compute_high_block_avx512(const HighBlock& b);

}  // namespace deepinfer::kernels::matmul_detail
