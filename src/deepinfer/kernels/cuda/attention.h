// Paged attention on the GPU with kernels/cpu/attention.h's params (GQA, sliding window,
// f32/f16/bf16 KV; mixed prefill chunks and decode rows). Every pointer in the params, the
// `seqs` array and each sequence's block_table included, is device memory.
//
// One thread block per (query row, head) walks its keys in chunks of 256 in ascending order
// with an online softmax (fp32); chunk maxima and sums meet in a fixed tree. A row's arithmetic
// depends only on its own sequence, so it is batch-invariant. Written, never yet run on a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "deepinfer/kernels/cpu/attention.h"

namespace deepinfer::cuda {

// Most V dimensions per head (4 accumulators per thread of 256).
inline constexpr int kMaxAttentionVDim = 1024;

// n_rows: the rows of q / out to compute (the sum of the sequences' n_tokens); rows that no
// sequence covers are left alone.
void paged_attention(const kernels::AttentionParams& p, int64_t n_rows, cudaStream_t stream);

}  // namespace deepinfer::cuda
