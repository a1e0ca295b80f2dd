// The warp_matmul kernel (matmul.h, moe_matmul.h), apart from its launchers in warp_matmul.cu so
// that tests/unit/cuda/device_emulation.h can also compile it as host code and check its logic
// (decoding, scales, groups, tiles) against the CPU references without a GPU.
//
// One warp per output column o and a tile of kRowTile rows; each lane dequantizes whole
// 32-element chunks of W[o] into registers and FMAs them against the tile's rows. One kernel
// instance per weight format serves both the plain launch (one group of rows) and the grouped
// one (rows sorted by expert, grid.y = expert).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "deepinfer/kernels/cuda/matmul.h"
#include "deepinfer/kernels/cuda/moe_matmul.h"
#include "deepinfer/kernels/cuda/quant_blocks.cuh"

// Internal linkage: the emulation test compiles its own host copy next to di_cuda's.
namespace deepinfer::cuda::detail::warp {
namespace {

constexpr int kWarps = 4;    // warps (output columns) per block
constexpr int kRowTile = 4;  // rows whose accumulators a lane holds at once
constexpr int kChunk = 32;   // elements per lane step: one Q8_0/Q4_1/FP4 block, 32 values otherwise
constexpr unsigned kMaxGridYZ = 65535;

using Kind = GroupedWeight;

// What every launcher hands the kernel: one weight (groups == nullptr) or one per group.
struct Args {
  const void* weight = nullptr;
  const void* scale = nullptr;
  const void* const* weights = nullptr;  // [n_groups] when grouped
  const void* const* scales = nullptr;   // [n_groups] when grouped (scaled formats)
  const int64_t* offsets = nullptr;      // [n_groups + 1]; null: one group, rows [0, n_rows)
  const int32_t* input_rows = nullptr;   // [n_rows] or null
  size_t weight_row_bytes = 0;
  int64_t scale_stride = 0;
  int block = 128;
  int64_t n_out = 0, n_in = 0, n_rows = 0;
  const float* input = nullptr;
  int64_t input_stride = 0;
  float* output = nullptr;
  int64_t output_stride = 0;
};

__host__ __device__ constexpr bool scaled(Kind k) {
  return k == Kind::kFp8Block || k == Kind::kFp4;
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// The n <= 32 values of chunk c of a weight row (for the scaled formats, before the scale).
template <Kind K>
__device__ __forceinline__ void load_chunk(const uint8_t* row, int64_t c, int n, float* w) {
  if constexpr (K == Kind::kQ8_0) {
    detail::dequant_q8_0(row + c * detail::kQ8_0Bytes, w);
  } else if constexpr (K == Kind::kQ4_1) {
    detail::dequant_q4_1(row + c * detail::kQ4_1Bytes, w);
  } else if constexpr (K == Kind::kFp8Block) {
    const uint8_t* src = row + c * kChunk;
    if (n == kChunk && aligned16(src)) {
      const uint4 a = reinterpret_cast<const uint4*>(src)[0],
                  b = reinterpret_cast<const uint4*>(src)[1];
      const uint32_t words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int j = 0; j < kChunk; ++j)
        w[j] = detail::fp8_e4m3_to_f32((words[j / 4] >> (8 * (j % 4))) & 0xFF);
    } else {
#pragma unroll
      for (int j = 0; j < kChunk; ++j) w[j] = j < n ? detail::fp8_e4m3_to_f32(src[j]) : 0.0f;
    }
  } else if constexpr (K == Kind::kFp4) {
    const uint8_t* src = row + c * (kChunk / 2);
    if (n == kChunk && aligned16(src)) {
      const uint4 a = reinterpret_cast<const uint4*>(src)[0];
      const uint32_t words[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int j = 0; j < kChunk; ++j)
        w[j] = detail::fp4_e2m1_to_f32(words[j / 8] >> (4 * (j % 8)));
    } else {
#pragma unroll
      for (int j = 0; j < kChunk; ++j)
        w[j] = j < n ? detail::fp4_e2m1_to_f32(src[j / 2] >> (4 * (j % 2))) : 0.0f;
    }
  } else if constexpr (K == Kind::kF32) {
    const float* src = reinterpret_cast<const float*>(row) + c * kChunk;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) w[j] = j < n ? src[j] : 0.0f;
  } else {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(row) + c * kChunk;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const uint16_t h = j < n ? src[j] : uint16_t{0};
      w[j] = K == Kind::kF16 ? detail::f16_bits_to_f32(h) : detail::bf16_bits_to_f32(h);
    }
  }
}

// The scale of chunk c of column o (scaled formats): FP8 by (o / block, 32c / block), FP4 by
// (o, c).
template <Kind K>
__device__ __forceinline__ float chunk_scale(const void* scale, const Args& p, int64_t o,
                                             int64_t c) {
  if constexpr (K == Kind::kFp8Block) {
    return static_cast<const float*>(scale)[(o / p.block) * p.scale_stride + c * kChunk / p.block];
  } else {
    return detail::ue8m0_to_f32(static_cast<const uint8_t*>(scale)[o * p.scale_stride + c]);
  }
}

template <Kind K>
__global__ void __launch_bounds__(kWarps * 32) warp_matmul_kernel(Args p) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (o >= p.n_out) return;
  int64_t r_begin = 0, r_end = p.n_rows;
  const void* weight = p.weight;
  const void* scale = p.scale;
  if (p.offsets) {
    r_begin = p.offsets[blockIdx.y];
    r_end = p.offsets[blockIdx.y + 1];
    if (r_begin >= r_end) return;
    weight = p.weights[blockIdx.y];
    if constexpr (scaled(K)) scale = p.scales[blockIdx.y];
  }
  const auto* row = static_cast<const uint8_t*>(weight) + o * p.weight_row_bytes;
  const int64_t n_chunks = (p.n_in + kChunk - 1) / kChunk;
  for (int64_t r0 = r_begin + int64_t{blockIdx.z} * kRowTile; r0 < r_end;
       r0 += int64_t{gridDim.z} * kRowTile) {
    const int rows = static_cast<int>(r_end - r0 < kRowTile ? r_end - r0 : kRowTile);
    const float* xs[kRowTile];
#pragma unroll
    for (int t = 0; t < kRowTile; ++t) {
      const int64_t r = r0 + (t < rows ? t : 0);
      xs[t] = p.input + (p.input_rows ? int64_t{p.input_rows[r]} : r) * p.input_stride;
    }
    float acc[kRowTile] = {};
    for (int64_t c = lane; c < n_chunks; c += 32) {
      const int n = static_cast<int>(p.n_in - c * kChunk < kChunk ? p.n_in - c * kChunk : kChunk);
      float w[kChunk];
      load_chunk<K>(row, c, n, w);
      float s = 1.0f;
      if constexpr (scaled(K)) s = chunk_scale<K>(scale, p, o, c);
#pragma unroll
      for (int t = 0; t < kRowTile; ++t) {
        if (t >= rows) break;
        const float* x = xs[t] + c * kChunk;
        // Scaled formats: the chunk's dot product first, then its scale once (as the CPU's
        // per-block sums); the others accumulate straight into the row's sum.
        float a = scaled(K) ? 0.0f : acc[t];
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
          if (j < n) a = fmaf(w[j], x[j], a);
        acc[t] = scaled(K) ? fmaf(a, s, acc[t]) : a;
      }
    }
#pragma unroll
    for (int t = 0; t < kRowTile; ++t) {
      float v = acc[t];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && t < rows) p.output[(r0 + t) * p.output_stride + o] = v;
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda::detail::warp
