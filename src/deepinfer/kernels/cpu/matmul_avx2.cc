// The avx2 build of the shared SIMD matmul tiles (matmul_simd_impl.h).
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "deepinfer/base/check.h"
#include "deepinfer/base/fp16.h"
#include "deepinfer/kernels/cpu/matmul_tile.h"
#include "deepinfer/kernels/cpu/prefetch.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "deepinfer/tensor/quant_blocks.h"

namespace deepinfer::kernels::matmul_detail {
namespace {
#define DI_MATMUL_VNNI 0
#include "deepinfer/kernels/cpu/matmul_simd_impl.h"
#undef DI_MATMUL_VNNI
}  // namespace

void compute_tile_avx2(const Tile& t) { compute_tile_simd(t); }

}  // namespace deepinfer::kernels::matmul_detail
