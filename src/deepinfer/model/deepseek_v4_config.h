// DeepSeek-V4 hyper-parameters from config.json: transformers' field names (layer_types,
// compress_rates, mlp_layer_types, nested rope_parameters {main, compress}) and the legacy ones
// transformers folds in (compress_ratios, compress_rate_csa/hca, num_hash_layers,
// qk_rope_head_dim, flat rope_parameters/rope_scaling). Validated here so the loader and the
// forward can trust every size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cpu/rope.h"

namespace deepinfer::model {

// Attention kind of one layer: sliding window only, or the window plus compressed entries
// (CSA: overlapping windows + Lightning indexer top-k; HCA: plain windows, all entries).
enum class V4Attn { kWindow, kCsa, kHca };

struct V4Layer {
  V4Attn attn = V4Attn::kWindow;
  int ratio = 0;          // compression ratio (0 for window-only layers)
  bool hash_moe = false;  // experts from the fixed tid2eid table instead of top-k
};

struct DeepseekV4Config {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int num_layers = 0;
  int n_heads = 0;
  int head_dim = 0;  // shared K=V head size
  int rope_dim = 0;  // trailing channels of a head that RoPE rotates
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int n_experts = 0;
  int top_k = 0;
  int64_t moe_inter = 0;
  int n_shared = 0;
  float routed_scaling = 1.0f;
  float swiglu_limit = 0.0f;  // 0 = no clamp
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  float hc_eps = 0.0f;
  float rms_eps = 1e-6f;
  int64_t max_position = 0;
  int num_mtp_layers = 0;
  bool tie_embeddings = false;
  // RoPE of window-only layers ("main") and of compressed layers and their compressors and
  // indexer ("compress"). Interleaved pairs on the last rope_dim channels.
  float main_theta = 10000.0f;
  kernels::RopeScaling main_scaling;
  float compress_theta = 160000.0f;
  kernels::RopeScaling compress_scaling;
  std::vector<V4Layer> layers;  // [num_layers]
};

// Parses and validates `path` (a config.json with model_type deepseek_v4). Errors name the file
// and the field.
Result<DeepseekV4Config> deepseek_v4_config_from_json(const std::string& path);

// The shape DeepSeek-V4 and V4.1 share (both configs carry these members under the same
// names): attention, routed experts, hyper-connections, norms. The first field out of range
// as an error naming `path` and the field, else OK. `rope_field` is how the family's
// config.json spells the rope channel count.
template <typename Config>
Status validate_v4_family_shape(const Config& c, const std::string& path, const char* rope_field) {
  auto bad = [&](const char* field, int64_t v) {
    return corrupt("{}: '{}' = {} is invalid", path, field, v);
  };
  if (c.vocab_size <= 0) return bad("vocab_size", c.vocab_size);
  if (c.hidden <= 0) return bad("hidden_size", c.hidden);
  if (c.num_layers <= 0 || c.num_layers > 1024) return bad("num_hidden_layers", c.num_layers);
  if (c.n_heads <= 0) return bad("num_attention_heads", c.n_heads);
  if (c.head_dim <= 0) return bad("head_dim", c.head_dim);
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim || c.rope_dim > c.index_head_dim)
    return bad(rope_field, c.rope_dim);
  if (c.q_lora_rank <= 0) return bad("q_lora_rank", c.q_lora_rank);
  if (c.o_groups <= 0 || c.n_heads % c.o_groups) return bad("o_groups", c.o_groups);
  if (c.o_lora_rank <= 0) return bad("o_lora_rank", c.o_lora_rank);
  if (c.sliding_window <= 0) return bad("sliding_window", c.sliding_window);
  if (c.index_n_heads <= 0) return bad("index_n_heads", c.index_n_heads);
  if (c.index_head_dim <= 0) return bad("index_head_dim", c.index_head_dim);
  if (c.index_topk <= 0) return bad("index_topk", c.index_topk);
  if (c.n_experts <= 0) return bad("n_routed_experts", c.n_experts);
  if (c.top_k <= 0 || c.top_k > c.n_experts) return bad("num_experts_per_tok", c.top_k);
  if (c.moe_inter <= 0) return bad("moe_intermediate_size", c.moe_inter);
  if (c.hc_mult <= 0 || c.hc_mult > 16) return bad("hc_mult", c.hc_mult);
  // The reference runs 20 rounds; a bound keeps a hostile config from stalling every token.
  if (c.hc_sinkhorn_iters <= 0 || c.hc_sinkhorn_iters > 1000) return bad("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  // A norm epsilon must be a small positive number: 0 or less turns a zero row into NaN.
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    return corrupt("{}: 'rms_norm_eps' = {} is invalid (it must be a positive number below 1)", path, c.rms_eps);
  if (!(c.hc_eps >= 0.0f && c.hc_eps < 1.0f))
    return corrupt("{}: 'hc_eps' = {} is invalid (it must be at least 0 and below 1)", path, c.hc_eps);
  if (c.max_position <= 0) return bad("max_position_embeddings", c.max_position);
  return Status::ok();
}

}  // namespace deepinfer::model
