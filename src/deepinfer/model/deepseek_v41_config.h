// DeepSeek-V4.1-Flash hyper-parameters (config.json with model_type deepseek_v41, the text model
// under text_config) and the per-layer roles they imply: which layers own a compressor (KV
// sources) and which read one, which run the indexer (index sources) and which reuse the latest
// top-k, which publishes the candidate-block mask and which select within it, where Engram runs.
// Validated here so a loader and a forward can trust every size and every role.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kernels/cpu/rope.h"

namespace deepinfer::model {

// What one layer does beyond its sliding window (DEEPSEEK_V4.md "V4.1-Flash differences").
struct V41Layer {
  int ratio = 0;          // compress ratio: 0 window only, else 1 or 2
  int kv_source = -1;     // layer whose compressed KV it reads (itself at a source); -1: none
  int index_source = -1;  // layer whose top-k it uses (itself at an index source); -1: none
  bool owns_compressor =
      false;                  // a KV source: compressor (+ indexer keys when also an index source)
  bool runs_indexer = false;  // an index source: scores and publishes top-k
  bool publishes_candidates = false;  // the candidate source (V4.1-Flash: layer 20)
  bool uses_candidates = false;  // an index source after the candidate source: selects within it
  bool engram = false;           // Engram n-gram embedding update at the start of the layer
};

// Engram n-gram embeddings: for n in 2..max_ngram, n_heads hashed columns of head_dim rows each.
struct V41EngramConfig {
  std::vector<int> layers = {};          // engram_layer_ids
  int max_ngram = 0;                     // engram_max_ngram_size (n-grams 2..max_ngram)
  int n_heads = 0;                       // hash heads per n-gram
  int head_dim = 0;                      // width of one table row
  std::vector<int64_t> vocab_size = {};  // [max_ngram - 1] per-n-gram bucket count before primes
  int pad_token_id = 2;                  // id standing before position 0 (normalized by the map)
};

struct DeepseekV41Config {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int num_layers = 0;
  int n_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source = -1;  // candidate_source_layer_id; -1: no candidate mask
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int n_experts = 0;
  int top_k = 0;
  int64_t moe_inter = 0;
  float routed_scaling = 1.0f;
  float gate_temp = 1.0f;  // router logits are divided by it before sqrt(softplus)
  float swiglu_limit = 0.0f;
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  float hc_eps = 0.0f;
  float rms_eps = 1e-20f;
  int64_t max_position = 0;
  int num_mtp_layers = 0;       // DSpark draft layers (not loaded yet)
  int fp8_block = 0;            // quantization_config weight_block_size edge; 0: no FP8 weights
  bool fp4_experts = false;     // expert_dtype "fp4"
  float main_theta = 10000.0f;  // window-only layers
  kernels::RopeScaling main_scaling = {};
  float compress_theta = 160000.0f;  // compressed layers, their compressors and indexers
  kernels::RopeScaling compress_scaling = {};
  V41EngramConfig engram = {};
  std::vector<int> kv_sources = {};     // kv_source_layer_ids, ascending
  std::vector<int> index_sources = {};  // index_source_layer_ids, ascending
  std::vector<V41Layer> layers = {};    // [num_layers]
};

// Parses and validates `path` (a config.json with model_type deepseek_v41). Errors name the file
// and the field.
Result<DeepseekV41Config> deepseek_v41_config_from_json(const std::string& path);

}  // namespace deepinfer::model
