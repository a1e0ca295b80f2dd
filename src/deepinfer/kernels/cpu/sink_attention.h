// Attention of one query token over a gathered list of shared K=V rows (any order, any source:
// window rows, compressed entries), with a learned sink logit per head in the softmax
// denominator (DeepSeek-V4, gpt-oss): out_h = sum_j p_hj k_j, p_hj = exp(s_hj) /
// (exp(sink_h) + sum_j exp(s_hj)), s_hj = scale * q_h . k_j. The scalar reference sums in
// double; the AVX2/AVX-512 variants sum in float (FMA) with a polynomial exp, chosen at run
// time. A query's result depends only on its own inputs (batch invariant in every variant).
#pragma once

#include <cstdint>

#include "deepinfer/base/cpu_features.h"

namespace deepinfer::kernels {

struct SinkAttentionParams {
  const float* q;            // [n_heads, head_dim]
  const float* const* keys;  // [n_keys] pointers to head_dim floats (K = V)
  int64_t n_keys;
  int n_heads;
  int head_dim;
  const float* sinks;  // [n_heads] logits (null: no sink)
  float scale;
  float* out;     // [n_heads, head_dim]
  float* scores;  // scratch [n_keys]
};

void sink_attention_reference(const SinkAttentionParams& p);
void sink_attention(const SinkAttentionParams& p);  // the best variant this CPU runs
void sink_attention_with_isa(const SinkAttentionParams& p, IsaLevel isa);

namespace detail {
void sink_attention_avx2(const SinkAttentionParams& p);
void sink_attention_avx512(const SinkAttentionParams& p);
}  // namespace detail

}  // namespace deepinfer::kernels
