// The avx512 build of the shared SIMD matmul tiles (matmul_simd_impl.h), with VNNI int8 dots,
// and the blocked kHigh and kInt8 kernels for many rows (matmul_high_block_avx512_impl.h,
// matmul_int8_block_avx512_impl.h).
// GCC 12 flags the deliberately undefined passthrough operand of unmasked AVX-512 shuffles
// (_mm512_undefined_ps) as uninitialized once inlined; the warning points into this header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul_high_block.h"
#include "deepinfer/kernels/cpu/matmul_int8_block.h"
#include "deepinfer/kernels/cpu/matmul_tile.h"
#include "deepinfer/kernels/cpu/prefetch.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::matmul_detail {
namespace {
#define DI_MATMUL_VNNI 1
#include "deepinfer/kernels/cpu/matmul_simd_impl.h"
#include "deepinfer/kernels/cpu/matmul_high_block_avx512_impl.h"
#include "deepinfer/kernels/cpu/matmul_high_block_impl.h"
#include "deepinfer/kernels/cpu/matmul_int8_block_avx512_impl.h"
#undef DI_MATMUL_VNNI
}  // namespace

void compute_tile_avx512(const Tile& t) { compute_tile_simd(t); }

void compute_high_block_avx512(const HighBlock& b) { high_block_simd(b); }

void compute_int8_block_avx512(const Int8Block& b) { int8_block_any(b); }

}  // namespace deepinfer::kernels::matmul_detail
