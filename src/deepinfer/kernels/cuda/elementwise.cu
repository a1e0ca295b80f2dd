// CUDA row kernels (elementwise.h). Arithmetic that the CPU reference does in a given order and
// precision is written with explicitly rounded intrinsics (__fmul_rn, __dadd_rn, ...) so that
// nvcc cannot contract it into FMAs; what remains different from the CPU is the order of the
// row reductions and the device's exp/sin/cos (documented tolerances in docs/cuda.md).
#include <cmath>

#include "deepinfer/kernels/cuda/elementwise.h"
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/quant_blocks.cuh"
#include "deepinfer/kernels/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

using detail::kThreads;

__global__ void rms_norm_kernel(RmsNormParams p) {
  __shared__ double red[kThreads];
  const float* x = p.x + blockIdx.x * p.x_stride;
  float* y = p.y + blockIdx.x * p.y_stride;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) ss = __dadd_rn(ss, __dmul_rn(x[i], x[i]));
  ss = detail::block_sum(ss, red);
  const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(p.dim) + p.eps));
  for (int64_t i = threadIdx.x; i < p.dim; i += kThreads)
    y[i] = __fmul_rn(__fmul_rn(x[i], inv), p.w ? p.w[i] : 1.0f);
}

__global__ void rope_kernel(RopeParams p) {
  extern __shared__ double cs[];  // [rot_dim]: cos in [0, h), sin in [h, 2h)
  const int h = p.rot_dim / 2;
  const double pos = p.positions[blockIdx.x];
  for (int i = threadIdx.x; i < h; i += blockDim.x) {
    double s, c;
    sincos(__dmul_rn(pos, p.inv_freq[i]), &s, &c);
    cs[i] = __dmul_rn(c, p.cos_sin_scale);
    cs[h + i] = __dmul_rn(s, p.cos_sin_scale);
  }
  __syncthreads();
  float* xt = p.x + blockIdx.x * p.token_stride;
  const bool half = p.layout == kernels::RopeLayout::kHalf;
  for (int idx = threadIdx.x; idx < p.n_heads * h; idx += blockDim.x) {
    const int head = idx / h, i = idx % h;
    float* x = xt + static_cast<int64_t>(head) * p.head_dim;
    const int a = half ? i : 2 * i, b = half ? i + h : 2 * i + 1;
    const double x0 = x[a], x1 = x[b], c = cs[i], s = cs[h + i];
    x[a] = static_cast<float>(__dsub_rn(__dmul_rn(x0, c), __dmul_rn(x1, s)));
    x[b] = static_cast<float>(__dadd_rn(__dmul_rn(x1, c), __dmul_rn(x0, s)));
  }
}

__device__ __forceinline__ float silu1(float x) {
  const double xd = x;
  return static_cast<float>(__ddiv_rn(xd, __dadd_rn(1.0, exp(-xd))));
}

__global__ void silu_kernel(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = silu1(x[i]);
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = __fmul_rn(silu1(gate[i]), up[i]);
}

__global__ void softmax_kernel(SoftmaxParams p) {
  __shared__ float redf[kThreads];
  __shared__ double redd[kThreads];
  const float* x = p.x + blockIdx.x * p.x_stride;
  float* y = p.y + blockIdx.x * p.y_stride;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) mx = fmaxf(mx, __fmul_rn(x[i], p.scale));
  mx = detail::block_max(mx, redf);
  if (mx == -INFINITY) {
    for (int64_t i = threadIdx.x; i < p.n; i += kThreads) y[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) {
    const float e = expf(__fsub_rn(__fmul_rn(x[i], p.scale), mx));
    y[i] = e;
    sum = __dadd_rn(sum, e);
  }
  sum = detail::block_sum(sum, redd);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) y[i] = __fmul_rn(y[i], inv);
}

__device__ __forceinline__ float load_element(const uint8_t* row, DType type, int64_t j) {
  switch (type) {
    case DType::kF32:
      return reinterpret_cast<const float*>(row)[j];
    case DType::kF16:
      return detail::f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::kBF16:
      return detail::bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::kQ8_0: {
      const uint8_t* blk = row + (j / detail::kQK) * detail::kQ8_0Bytes;
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      return __fmul_rn(
          static_cast<float>(reinterpret_cast<const int8_t*>(blk + 2)[j % detail::kQK]), d);
    }
    case DType::kQ4_1: {
      const uint8_t* blk = row + (j / detail::kQK) * detail::kQ4_1Bytes;
      const int k = static_cast<int>(j % detail::kQK);
      const uint8_t q = blk[4 + (k % 16)];
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      const float m = detail::f16_bits_to_f32(detail::load_u16(blk + 2));
      return __fadd_rn(__fmul_rn(static_cast<float>(k < 16 ? q & 0xF : q >> 4), d), m);
    }
    default:
      return NAN;  // refused by check_embedding
  }
}

__global__ void embedding_kernel(EmbeddingParams p) {
  const auto* row =
      static_cast<const uint8_t*>(p.table) + static_cast<size_t>(p.ids[blockIdx.x]) * p.row_bytes;
  float* out = p.out + blockIdx.x * p.dim;
  for (int64_t j = threadIdx.x; j < p.dim; j += kThreads) out[j] = load_element(row, p.type, j);
}

unsigned elementwise_blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);  // grid-stride beyond that
}

}  // namespace

void rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.dim <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  detail::check_launch("rms_norm");
}

void rope(const RopeParams& p, cudaStream_t stream) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const size_t smem = sizeof(double) * static_cast<size_t>(p.rot_dim);
  rope_kernel<<<static_cast<unsigned>(p.n_tokens), 128, smem, stream>>>(p);
  detail::check_launch("rope");
}

void silu(const float* x, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  silu_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(x, out, n);
  detail::check_launch("silu");
}

void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(gate, up, out, n);
  detail::check_launch("swiglu");
}

void softmax(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.n <= 0) return;
  softmax_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  detail::check_launch("softmax");
}

void embedding_lookup(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.dim <= 0) return;
  embedding_kernel<<<static_cast<unsigned>(p.n), kThreads, 0, stream>>>(p);
  detail::check_launch("embedding_lookup");
}

}  // namespace deepinfer::cuda
