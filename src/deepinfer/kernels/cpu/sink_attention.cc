// Gathered-key attention with a sink logit: scores, max-subtracted softmax in double, weighted
// sum (the reference), and the dispatch to the SIMD variants.
#include "deepinfer/kernels/cpu/sink_attention.h"

#include <cmath>
#include <limits>

namespace deepinfer::kernels {

void sink_attention_reference(const SinkAttentionParams& p) {
  const int D = p.head_dim;
  for (int h = 0; h < p.n_heads; ++h) {
    const float* q = p.q + int64_t{h} * D;
    float* o = p.out + int64_t{h} * D;
    double mx = p.sinks ? double(p.sinks[h]) : -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < p.n_keys; ++j) {
      double dot = 0;
      for (int c = 0; c < D; ++c) dot += double(q[c]) * p.keys[j][c];
      p.scores[j] = static_cast<float>(dot * p.scale);
      mx = std::max(mx, double(p.scores[j]));
    }
    double denom = p.sinks ? std::exp(double(p.sinks[h]) - mx) : 0.0;
    for (int64_t j = 0; j < p.n_keys; ++j) denom += std::exp(double(p.scores[j]) - mx);
    for (int c = 0; c < D; ++c) o[c] = 0;
    if (denom == 0) continue;
    for (int64_t j = 0; j < p.n_keys; ++j) {
      const float w = static_cast<float>(std::exp(double(p.scores[j]) - mx) / denom);
      for (int c = 0; c < D; ++c) o[c] += w * p.keys[j][c];
    }
  }
}

void sink_attention_with_isa(const SinkAttentionParams& p, IsaLevel isa) {
  if (isa >= IsaLevel::kAvx512) return detail::sink_attention_avx512(p);
  if (isa >= IsaLevel::kAvx2) return detail::sink_attention_avx2(p);
  sink_attention_reference(p);
}

void sink_attention(const SinkAttentionParams& p) { sink_attention_with_isa(p, best_isa()); }

}  // namespace deepinfer::kernels
