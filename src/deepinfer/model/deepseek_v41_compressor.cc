// V4.1 compressor sizes and the indexer keys made from its entries.
#include "deepinfer/model/deepseek_v41_compressor.h"

#include <vector>

#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {

V4CompressorDims v41_compressor_dims(const DeepseekV41Config& c, int ratio) {
  V4CompressorDims d;
  d.dim = c.head_dim;
  d.ratio = ratio;
  d.overlap = false;
  d.rope_dim = c.rope_dim;
  d.theta = c.compress_theta;
  d.scaling = c.compress_scaling;
  d.eps = c.rms_eps;
  return d;
}

void v41_index_keys(const DeepseekV41Config& c, const V41Indexer& w, int ratio,
                    const float* latents, const int32_t* entry_index, int64_t n, float* keys,
                    ForwardContext& ctx) {
  const int64_t dk = c.index_head_dim;
  linear_forward(w.wk, latents, n, c.head_dim, keys, dk, ctx);
  rms_norm_rows(keys, dk, w.k_norm, keys, dk, n, dk, c.rms_eps);
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = entry_index[i] * ratio;
  kernels::RopeParams p{};
  p.x = keys + (dk - c.rope_dim);
  p.n_tokens = n;
  p.n_heads = 1;
  p.head_dim = c.rope_dim;
  p.rot_dim = c.rope_dim;
  p.token_stride = dk;
  p.positions = positions.data();
  p.theta = c.compress_theta;
  p.layout = kernels::RopeLayout::kInterleaved;
  p.scaling = c.compress_scaling;
  kernels::rope(p);
}

}  // namespace deepinfer::model
