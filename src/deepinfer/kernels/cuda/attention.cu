// Paged attention (attention.h).
#include "deepinfer/kernels/cuda/attention.h"
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/quant_blocks.cuh"
#include "deepinfer/kernels/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

using detail::kThreads;
constexpr int kAccPerThread = kMaxAttentionVDim / kThreads;

__device__ __forceinline__ float load_kv(const void* base, int64_t off, DType t) {
  if (t == DType::kF32) return static_cast<const float*>(base)[off];
  const uint16_t h = static_cast<const uint16_t*>(base)[off];
  return t == DType::kF16 ? detail::f16_bits_to_f32(h) : detail::bf16_bits_to_f32(h);
}

__global__ void paged_attention_kernel(kernels::AttentionParams p) {
  extern __shared__ float q[];  // [head_dim]
  __shared__ float w[kThreads];
  __shared__ float red[kThreads];
  const int64_t row = blockIdx.x;
  const int h = blockIdx.y;
  int si = 0;
  while (si < p.n_seqs &&
         !(row >= p.seqs[si].token_start && row < p.seqs[si].token_start + p.seqs[si].n_tokens))
    ++si;
  if (si == p.n_seqs) return;  // uniform across the block
  const kernels::AttentionSeq s = p.seqs[si];
  const int64_t pos = s.first_pos + (row - s.token_start);
  const int64_t hi = pos;
  const int64_t lo =
      p.sliding_window > 0 ? (pos - p.sliding_window + 1 > 0 ? pos - p.sliding_window + 1 : 0) : 0;
  const int g = h / (p.n_heads / p.n_kv_heads);
  for (int d = threadIdx.x; d < p.head_dim; d += kThreads)
    q[d] = p.q[row * p.q_stride + int64_t{h} * p.head_dim + d];
  __syncthreads();

  float m = -INFINITY, l = 0.0f, acc[kAccPerThread] = {};
  for (int64_t c0 = lo; c0 <= hi; c0 += kThreads) {
    const int64_t key = c0 + threadIdx.x;
    float score = -INFINITY;
    if (key <= hi) {
      const int64_t off = int64_t{s.block_table[key / p.block_size]} * p.block_stride +
                          (key % p.block_size) * p.token_stride + int64_t{g} * p.head_dim;
      float dot = 0.0f;
      for (int d = 0; d < p.head_dim; ++d)
        dot = fmaf(q[d], load_kv(p.k_cache, off + d, p.kv_type), dot);
      score = dot * p.scale;
    }
    const float new_m = fmaxf(m, detail::block_max(score, red));
    const float alpha = m == -INFINITY ? 0.0f : expf(m - new_m);
    const float e = key <= hi ? expf(score - new_m) : 0.0f;
    w[threadIdx.x] = e;
    l = l * alpha + detail::block_sum(e, red);  // block_sum synchronizes, so w is complete
    const int nk = static_cast<int>(hi - c0 + 1 < kThreads ? hi - c0 + 1 : kThreads);
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      const int d = threadIdx.x + i * kThreads;
      if (d >= p.v_head_dim) break;
      float a = acc[i] * alpha;
      for (int j = 0; j < nk; ++j) {
        const int64_t key_j = c0 + j;
        const int64_t off = int64_t{s.block_table[key_j / p.block_size]} * p.block_stride +
                            (key_j % p.block_size) * p.token_stride + int64_t{g} * p.v_head_dim;
        a = fmaf(w[j], load_kv(p.v_cache, off + d, p.kv_type), a);
      }
      acc[i] = a;
    }
    m = new_m;
    __syncthreads();  // w is rewritten by the next chunk
  }
  float* out = p.out + row * p.out_stride + int64_t{h} * p.v_head_dim;
#pragma unroll
  for (int i = 0; i < kAccPerThread; ++i) {
    const int d = threadIdx.x + i * kThreads;
    if (d < p.v_head_dim) out[d] = acc[i] / l;
  }
}

}  // namespace

void paged_attention(const kernels::AttentionParams& p, int64_t n_rows, cudaStream_t stream) {
  if (n_rows <= 0 || p.n_heads <= 0 || p.n_seqs <= 0) return;
  const dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(p.n_heads));
  paged_attention_kernel<<<grid, kThreads, sizeof(float) * static_cast<size_t>(p.head_dim),
                           stream>>>(p);
  detail::check_launch("paged_attention");
}

}  // namespace deepinfer::cuda
