// Our own CUDA matmul (matmul.h): one warp per output column o and a tile of kRowTile rows;
// each lane dequantizes whole 32-element chunks of W[o] into registers and FMAs them against
// the tile's rows. The dispatch table below is the one place weight types meet kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "deepinfer/kernels/cuda/quant_blocks.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 4;    // warps (output columns) per block
constexpr int kRowTile = 4;  // rows whose accumulators a lane holds at once
constexpr int kChunk = 32;   // elements per lane step: one Q8_0/Q4_1 block, 32 floats otherwise

enum class Kind { kF32, kF16, kBF16, kQ8_0, kQ4_1 };

// The n <= 32 values of chunk c of a weight row.
template <Kind K>
__device__ __forceinline__ void load_chunk(const uint8_t* row, int64_t c, int n, float* w) {
  if constexpr (K == Kind::kQ8_0) {
    detail::dequant_q8_0(row + c * detail::kQ8_0Bytes, w);
  } else if constexpr (K == Kind::kQ4_1) {
    detail::dequant_q4_1(row + c * detail::kQ4_1Bytes, w);
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

template <Kind K>
__global__ void __launch_bounds__(kWarps * 32) warp_matmul_kernel(MatmulParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (o >= p.n_out) return;
  const auto* row = static_cast<const uint8_t*>(p.weight) + o * p.weight_row_bytes;
  const int64_t n_chunks = (p.n_in + kChunk - 1) / kChunk;
  for (int64_t r0 = int64_t{blockIdx.y} * kRowTile; r0 < p.n_rows;
       r0 += int64_t{gridDim.y} * kRowTile) {
    const int rows = static_cast<int>(p.n_rows - r0 < kRowTile ? p.n_rows - r0 : kRowTile);
    float acc[kRowTile] = {};
    for (int64_t c = lane; c < n_chunks; c += 32) {
      const int n = static_cast<int>(p.n_in - c * kChunk < kChunk ? p.n_in - c * kChunk : kChunk);
      float w[kChunk];
      load_chunk<K>(row, c, n, w);
#pragma unroll
      for (int t = 0; t < kRowTile; ++t) {
        if (t >= rows) break;
        const float* x = p.input + (r0 + t) * p.input_stride + c * kChunk;
        float a = acc[t];
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
          if (j < n) a = fmaf(w[j], x[j], a);
        acc[t] = a;
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

struct Entry {
  DType type;
  void (*kernel)(MatmulParams);
  const char* name;
};

// The dispatch table: weight type -> kernel instance. Anything absent is refused loudly.
constexpr Entry kTable[] = {
    {DType::kF32, warp_matmul_kernel<Kind::kF32>, "warp_matmul<f32>"},
    {DType::kF16, warp_matmul_kernel<Kind::kF16>, "warp_matmul<f16>"},
    {DType::kBF16, warp_matmul_kernel<Kind::kBF16>, "warp_matmul<bf16>"},
    {DType::kQ8_0, warp_matmul_kernel<Kind::kQ8_0>, "warp_matmul<q8_0>"},
    {DType::kQ4_1, warp_matmul_kernel<Kind::kQ4_1>, "warp_matmul<q4_1>"},
};

const Entry* find_entry(DType t) {
  for (const Entry& e : kTable)
    if (e.type == t) return &e;
  return nullptr;
}

template <typename T>
__global__ void convert_kernel(const float* src, int64_t n_rows, int64_t n_in, int64_t src_stride,
                               T* dst) {
  const int64_t total = n_rows * n_in;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = src[(i / n_in) * src_stride + i % n_in];
    dst[i] = T(v);  // round to nearest even (__float2half_rn / __float2bfloat16_rn)
  }
}

}  // namespace

bool warp_matmul_supports(DType weight_type) { return find_entry(weight_type) != nullptr; }

void warp_matmul(const MatmulParams& p, cudaStream_t stream) {
  const Entry* e = find_entry(p.weight_type);
  if (!e)
    detail::launch_failed("warp_matmul (weight type without a kernel)", cudaErrorInvalidValue);
  if (p.n_rows <= 0 || p.n_out <= 0) return;
  const int64_t tiles = (p.n_rows + kRowTile - 1) / kRowTile;
  const dim3 grid(static_cast<unsigned>((p.n_out + kWarps - 1) / kWarps),
                  static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  e->kernel<<<grid, kWarps * 32, 0, stream>>>(p);
  detail::check_launch(e->name);
}

void convert_rows_f32(const float* src, int64_t n_rows, int64_t n_in, int64_t src_stride, void* dst,
                      DType dst_type, cudaStream_t stream) {
  const int64_t total = n_rows * n_in;
  if (total <= 0) return;
  const int64_t blocks64 = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 65535 ? blocks64 : 65535);
  if (dst_type == DType::kF16)
    convert_kernel<__half>
        <<<blocks, 256, 0, stream>>>(src, n_rows, n_in, src_stride, static_cast<__half*>(dst));
  else if (dst_type == DType::kBF16)
    convert_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(src, n_rows, n_in, src_stride,
                                                              static_cast<__nv_bfloat16*>(dst));
  else
    detail::launch_failed("convert_rows_f32 (destination neither f16 nor bf16)",
                          cudaErrorInvalidValue);
  detail::check_launch("convert_rows_f32");
}

}  // namespace deepinfer::cuda
