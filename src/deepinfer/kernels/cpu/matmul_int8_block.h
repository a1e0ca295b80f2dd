// Internal to matmul's kInt8 mode for many rows (AVX-512 VNNI): a block of output columns of a
// 32-element weight type is unpacked once into an int8 scratch laid out for vpdpbusd (two
// columns per 512-bit vector, with their per-lane offset corrections and scales), then every
// row passes over it in register tiles, instead of decoding each weight block once per 8 rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels::matmul_detail {

// From this many rows matmul uses the blocked kernel; up to 8 rows one per-column tile
// (matmul_simd_impl.h) covers them with a single decode of each weight block. Q8_0's decode
// is a plain load, so its tiles stay as fast as the blocked kernel up to ~24 rows (measured
// 49152x576, 1 thread: 9-16 rows slower blocked, 24 even, 32 +12%); the 4- and 5-bit types
// gain from 9 rows (q4_1 1536x576 at 12 rows +30%).
inline constexpr int64_t kInt8BlockMinRows = 9;
inline int64_t int8_block_min_rows(DType type) {
  return type == DType::kQ8_0 ? 24 : kInt8BlockMinRows;
}

// Bytes of one column pair's 32-element block in the scratch: 64 weight bytes (column A's 32
// integers, then B's), 16 int32 lanes of -128 * sum(w) over each lane's 4 weights (the signed
// types only), 16 float lanes of the block scales (A's eight times, then B's).
inline constexpr size_t kInt8PairBlockBytes = 192;

// Output columns per block: their unpacked form (3 bytes per weight) stays in L2.
inline constexpr size_t kInt8BlockScratchBytes = 512 * 1024;
inline int64_t int8_block_cols(int64_t n_in) {
  const int64_t cols =
      static_cast<int64_t>(kInt8BlockScratchBytes / (3 * static_cast<size_t>(n_in)));
  return cols < 16 ? 16 : cols / 16 * 16;
}

// Rows per pass over the column blocks: their quantized activations (1.5 bytes per input)
// stay in L2 next to the scratch.
inline constexpr size_t kInt8BlockActBytes = 1024 * 1024;
inline int64_t int8_block_row_chunk(int64_t n_in) {
  const int64_t rows =
      static_cast<int64_t>(kInt8BlockActBytes * 2 / (3 * static_cast<size_t>(n_in)));
  return rows < 64 ? 64 : rows;
}

// Scratch bytes for a block of `cols` columns: the column pairs, then the mins of the _1 types
// as floats, [cols / 16][n_in / 32][16].
inline size_t int8_block_scratch_bytes(int64_t cols, int64_t n_in) {
  const size_t nk = static_cast<size_t>(n_in / 32);
  return static_cast<size_t>((cols + 1) / 2) * nk * kInt8PairBlockBytes +
         static_cast<size_t>((cols + 15) / 16) * nk * 16 * sizeof(float);
}

inline bool int8_block_supports(DType type) {
  return type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ5_0 ||
         type == DType::kQ5_1 || type == DType::kQ8_0;
}

struct Int8Block {
  DType type;             // int8_block_supports(type)
  const uint8_t* weight;  // row 0 of the weight matrix
  size_t weight_row_bytes;
  int64_t n_in;                // multiple of 32
  int64_t col_begin, col_end;  // this block's output columns
  const uint8_t* act;  // [n_rows] rows of n_in / 32 ActBlock32 stored unsigned, act_row_bytes apart
  size_t act_row_bytes;
  int64_t n_rows;
  float* out;  // [n_rows, out_stride], column 0 of row 0
  int64_t out_stride;
  uint8_t* scratch;  // int8_block_scratch_bytes(col_end - col_begin, n_in), 64-byte aligned
};

// Same bits as compute_tile_avx512 for every (row, column): the same exact int32 lanes, and
// per lane the tile's float sequence (blocks in pairs, the same products, FMAs and sums), so
// rows may go through either path (batch invariance).
void compute_int8_block_avx512(const Int8Block& b);

}  // namespace deepinfer::kernels::matmul_detail
