// Our own CUDA matmul (matmul.h, moe_matmul.h): one warp per output column o and a tile of
// kRowTile rows; each lane dequantizes whole 32-element chunks of W[o] into registers and FMAs
// them against the tile's rows. One kernel instance per weight format serves both the plain
// launch (one group of rows) and the grouped one (rows sorted by expert, grid.y = expert). The
// dispatch table below is the one place weight formats meet kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/matmul.h"
#include "deepinfer/kernels/cuda/moe_matmul.h"
#include "deepinfer/kernels/cuda/quant_blocks.cuh"

namespace deepinfer::cuda {
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

__host__ __device__ constexpr bool scaled(Kind k) { return k == Kind::kFp8Block || k == Kind::kFp4; }

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
      const uint4 a = reinterpret_cast<const uint4*>(src)[0], b = reinterpret_cast<const uint4*>(src)[1];
      const uint32_t words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int j = 0; j < kChunk; ++j) w[j] = detail::fp8_e4m3_to_f32((words[j / 4] >> (8 * (j % 4))) & 0xFF);
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
      for (int j = 0; j < kChunk; ++j) w[j] = detail::fp4_e2m1_to_f32(words[j / 8] >> (4 * (j % 8)));
    } else {
#pragma unroll
      for (int j = 0; j < kChunk; ++j) w[j] = j < n ? detail::fp4_e2m1_to_f32(src[j / 2] >> (4 * (j % 2))) : 0.0f;
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
__device__ __forceinline__ float chunk_scale(const void* scale, const Args& p, int64_t o, int64_t c) {
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

struct Entry {
  Kind kind;
  void (*kernel)(Args);
  const char* name;
};

// The dispatch table: weight format -> kernel instance. Anything absent is refused loudly.
constexpr Entry kTable[] = {
    {Kind::kF32, warp_matmul_kernel<Kind::kF32>, "warp_matmul<f32>"},
    {Kind::kF16, warp_matmul_kernel<Kind::kF16>, "warp_matmul<f16>"},
    {Kind::kBF16, warp_matmul_kernel<Kind::kBF16>, "warp_matmul<bf16>"},
    {Kind::kQ8_0, warp_matmul_kernel<Kind::kQ8_0>, "warp_matmul<q8_0>"},
    {Kind::kQ4_1, warp_matmul_kernel<Kind::kQ4_1>, "warp_matmul<q4_1>"},
    {Kind::kFp8Block, warp_matmul_kernel<Kind::kFp8Block>, "warp_matmul<fp8_e4m3 block>"},
    {Kind::kFp4, warp_matmul_kernel<Kind::kFp4>, "warp_matmul<fp4_e2m1 ue8m0>"},
};

const Entry* find_entry(Kind k) {
  for (const Entry& e : kTable)
    if (e.kind == k) return &e;
  return nullptr;
}

bool kind_of(DType t, Kind* k) {
  switch (t) {
    case DType::kF32: *k = Kind::kF32; return true;
    case DType::kF16: *k = Kind::kF16; return true;
    case DType::kBF16: *k = Kind::kBF16; return true;
    case DType::kQ8_0: *k = Kind::kQ8_0; return true;
    case DType::kQ4_1: *k = Kind::kQ4_1; return true;
    default: return false;
  }
}

unsigned clamp_grid(int64_t v) {
  return static_cast<unsigned>(v < 1 ? 1 : v < kMaxGridYZ ? v : kMaxGridYZ);
}

// grid: x = column groups, y = groups of rows (experts), z = slices of a group's row tiles.
void launch(Kind k, const Args& a, int64_t n_groups, int64_t rows_per_group, cudaStream_t stream) {
  const Entry* e = find_entry(k);
  if (!e) detail::launch_failed("warp_matmul (weight format without a kernel)", cudaErrorInvalidValue);
  if (a.n_rows <= 0 || a.n_out <= 0) return;
  const dim3 grid(static_cast<unsigned>((a.n_out + kWarps - 1) / kWarps), clamp_grid(n_groups),
                  clamp_grid((rows_per_group + kRowTile - 1) / kRowTile));
  e->kernel<<<grid, kWarps * 32, 0, stream>>>(a);
  detail::check_launch(e->name);
}

template <typename P>
Args plain_args(const P& p) {
  Args a;
  a.weight_row_bytes = p.weight_row_bytes;
  a.n_out = p.n_out;
  a.n_in = p.n_in;
  a.n_rows = p.n_rows;
  a.input = p.input;
  a.input_stride = p.input_stride;
  a.output = p.output;
  a.output_stride = p.output_stride;
  return a;
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

bool warp_matmul_supports(DType weight_type) {
  Kind k;
  return kind_of(weight_type, &k);
}

void warp_matmul(const MatmulParams& p, cudaStream_t stream) {
  Kind k;
  if (!kind_of(p.weight_type, &k))
    detail::launch_failed("warp_matmul (weight type without a kernel)", cudaErrorInvalidValue);
  Args a = plain_args(p);
  a.weight = p.weight;
  launch(k, a, 1, p.n_rows, stream);
}

void fp8_matmul(const Fp8MatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weight = p.weight;
  a.scale = p.scale_inv;
  a.scale_stride = p.scale_stride;
  a.block = p.block;
  launch(Kind::kFp8Block, a, 1, p.n_rows, stream);
}

void fp4_matmul(const Fp4MatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weight = p.weight;
  a.scale = p.scale;
  a.scale_stride = p.scale_stride;
  launch(Kind::kFp4, a, 1, p.n_rows, stream);
}

void grouped_matmul(const GroupedMatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weights = p.weights;
  a.scales = p.scales;
  a.offsets = p.group_offsets;
  a.input_rows = p.input_rows;
  a.scale_stride = p.scale_stride;
  a.block = p.block;
  launch(p.format, a, p.n_groups, p.max_group_rows > 0 ? p.max_group_rows : 1, stream);
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
