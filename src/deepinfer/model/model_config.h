// Hyper-parameters of a decoder-only transformer, read from GGUF metadata or a Hugging Face
// config.json. Architectures read the fields they use; absent optional fields keep defaults.
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::format {
class GgufFile;
}

namespace deepinfer::model {

// Which channel pairs RoPE rotates: GGUF llama files store Q/K permuted for adjacent pairs
// (2i, 2i+1); Hugging Face checkpoints use rotate-half pairs (i, i + d/2).
enum class RopePairing { kInterleaved, kHalf };

struct RopeScalingConfig {
  std::string type = "none";  // none | linear | llama3 | yarn
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position = 0;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float mscale = 1.0f;
  float mscale_all_dim = 0.0f;
  float attention_factor = 0.0f;  // yarn cos/sin multiplier; 0 = derive as transformers does
};

struct ModelConfig {
  std::string architecture;  // registry name: "llama", "deepseek_v3", ...
  std::string name;          // human-readable model name
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t max_position = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int rope_dim = 0;  // channels rotated per head (= head_dim for llama)
  RopePairing rope_pairing = RopePairing::kHalf;
  RopeScalingConfig rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;

  // DeepSeek-V3 family (MLA + DeepSeekMoE + MTP); zero/defaults for other architectures.
  int q_lora_rank = 0;  // 0: q_proj, no LoRA (config.json null)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int first_k_dense_replace = 0;  // layers [0, k) use the dense MLP
  int moe_layer_freq = 1;
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  int num_nextn_predict_layers = 0;
};

// GGUF: keys "<arch>.block_count", "<arch>.embedding_length", ... (llama.cpp's names).
Result<ModelConfig> config_from_gguf(const format::GgufFile& gguf);
// Hugging Face: the config.json of a model directory.
Result<ModelConfig> config_from_hf_json(const std::string& config_json_path);

}  // namespace deepinfer::model
