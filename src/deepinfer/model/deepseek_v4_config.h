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

}  // namespace deepinfer::model
