// The avx2 build of the shared SIMD matmul tiles (matmul_simd_impl.h) and of the blocked kHigh
// kernel for many rows (matmul_high_block_avx2_impl.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul_high_block.h"
#include "deepinfer/kernels/cpu/matmul_tile.h"
#include "deepinfer/kernels/cpu/prefetch.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::matmul_detail {
namespace {
#define DI_MATMUL_VNNI 0
// In this order: the block kernel uses high_chunk (matmul_simd_impl.h), and its shared part
// uses this ISA's tile.
// clang-format off
#include "deepinfer/kernels/cpu/matmul_simd_impl.h"
#include "deepinfer/kernels/cpu/matmul_high_block_avx2_impl.h"
#include "deepinfer/kernels/cpu/matmul_high_block_impl.h"
// clang-format on
#undef DI_MATMUL_VNNI
}  // namespace

void compute_tile_avx2(const Tile& t) { compute_tile_simd(t); }

void compute_high_block_avx2(const HighBlock& b) { high_block_simd(b); }

}  // namespace deepinfer::kernels::matmul_detail
