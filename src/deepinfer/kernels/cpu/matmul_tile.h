// Internal to the matmul kernels: one "tile" is up to kMaxTileRows activation rows times a range
// of output columns. Every ISA variant implements compute_tile; matmul.cc splits the work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::kernels::matmul_detail {

inline constexpr int kMaxTileRows = 8;   // AVX-512 (32 vector registers)
inline constexpr int kAvx2TileRows = 4;  // AVX2 has 16 registers

enum class ActKind { kFloat, kQ8_32, kQ8_K };
ActKind act_kind(DType weight_type);

struct Tile {
  DType type;
  const uint8_t* weight;   // row 0 of the weight matrix
  size_t weight_row_bytes;
  int64_t n_in;
  int64_t col_begin, col_end;
  const uint8_t* act;      // this tile's first activation row: floats, ActBlock32s or BlockQ8_Ks
  size_t act_row_bytes;
  int rows;                // 1..kMaxTileRows
  float* out;              // output of this tile's first row, column 0
  int64_t out_stride;
  bool high = false;       // kHigh precision: act holds fp32 rows even for quantized weights
};

// Each computes out[r][o] for r < rows, o in [col_begin, col_end). The value for a given
// (row, column) must not depend on `rows` or the column range: that is batch invariance.
// The AVX-512 variant wants Q8_32 activations stored unsigned (ActSign::kUnsigned).
void compute_tile_scalar(const Tile& t);
void compute_tile_avx2(const Tile& t);
void compute_tile_avx512(const Tile& t);

}  // namespace deepinfer::kernels::matmul_detail
