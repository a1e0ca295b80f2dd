// Grouped-query attention with RoPE over the paged KV cache (f32, f16 or bf16) (multi-head and multi-query
// attention are the cases n_kv_heads == n_heads and n_kv_heads == 1): Q/K/V projections (with
// optional biases), RoPE on Q and K, the new K/V written into the layer's pools, paged causal
// attention, output projection.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/forward_batch.h"
#include "deepinfer/model/layers/linear.h"

namespace deepinfer::model {

struct GqaWeights {
  LinearWeight wq;  // [n_heads * head_dim, hidden] (+ bias)
  LinearWeight wk;  // [n_kv_heads * head_dim, hidden] (+ bias)
  LinearWeight wv;  // [n_kv_heads * head_dim, hidden] (+ bias)
  LinearWeight wo;  // [hidden, n_heads * head_dim]
};

struct GqaDims {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // leading channels of a head that RoPE rotates
  float rope_theta = 10000.0f;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kHalf;
  kernels::RopeScaling rope_scaling;
  float softmax_scale = 0.0f;  // 1 / sqrt(head_dim)
  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
};

// Activation buffers owned by the caller: q and attn [T, q_dim], k and v [T, kv_dim].
struct GqaBuffers {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  float* attn = nullptr;
};

// One layer's K and V pools ([blocks, block_size, n_kv_heads, head_dim] of `dtype` elements).
struct GqaCache {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;  // kF32, kF16 or kBF16
  int block_size = 0;
};

// The batch's sequences as the attention kernel sees them (built once per forward).
std::vector<kernels::AttentionSeq> attention_seqs(const ForwardBatch& batch);

// x: normalized hidden states [T, hidden] -> out [T, hidden]; writes the batch's K/V into the
// layer's pools (rounded to the cache's dtype) and attends over what the pools hold, so a token's
// own K/V and a cached prefix's are read alike.
void gqa_attention_forward(const GqaWeights& w, const GqaDims& d, const ForwardBatch& batch,
                           const std::vector<kernels::AttentionSeq>& seqs, const float* x, int64_t hidden,
                           const GqaCache& cache, const GqaBuffers& buf, ForwardContext& ctx, float* out);

}  // namespace deepinfer::model
