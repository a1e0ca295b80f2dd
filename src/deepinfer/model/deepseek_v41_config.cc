// config.json -> DeepseekV41Config: the text model's fields under text_config (transformers-style
// names: kv_source_layer_ids, index_source_layer_ids, candidate_source_layer_id, engram_*),
// quantization_config and expert_dtype at the top level, then the per-layer roles.
#include "deepinfer/model/deepseek_v41_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "deepinfer/model/deepseek_v4_config.h"
#include "deepinfer/model/hf_config_json.h"
#include "deepinfer/model/layers/rope_scaling.h"

namespace deepinfer::model {
namespace {

using nlohmann::json;

template <typename T>
T get(const json& j, const char* key, T dflt) {
  return hf::field(j, key, dflt, hf::Null::kDefault);
}

// Flat RoPE block: YaRN (or none) for the compressed layers; window-only layers keep plain RoPE,
// as in V4 (DEEPSEEK_V4.md: rope_theta without YaRN / compress_rope_theta with YaRN).
Status parse_rope(const json& t, DeepseekV41Config& c, const std::string& path) {
  c.main_theta = get(t, "rope_theta", 10000.0f);
  c.compress_theta = get(t, "compress_rope_theta", 160000.0f);
  const json* rp = hf::rope_block(t);
  if (!rp) return Status::ok();
  float ignored = c.compress_theta;
  const RopeScalingConfig rs = hf::rope_scaling(*rp, &ignored, hf::Null::kDefault);
  if (rs.type == "none") return Status::ok();
  if (rs.type != "yarn")
    return unsupported(
        "{}: rope type '{}' is not supported for deepseek_v41 (supported: default, yarn)", path,
        rs.type);
  DI_ASSIGN_OR_RETURN(c.compress_scaling, rope_scaling_from_config(rs, path, "deepseek_v41"));
  // Frequency blend only, as V4: no cos/sin mscale.
  c.compress_scaling.attention_factor = 1.0f;
  c.compress_scaling.mscale = 1.0f;
  c.compress_scaling.mscale_all_dim = 0.0f;
  return Status::ok();
}

Status parse_sizes(const json& t, DeepseekV41Config& c, const std::string& path) {
  c.vocab_size = get(t, "vocab_size", int64_t{129280});
  c.hidden = get(t, "hidden_size", int64_t{5120});
  c.num_layers = get(t, "num_hidden_layers", 40);
  c.n_heads = get(t, "num_attention_heads", 64);
  c.head_dim = get(t, "head_dim", 512);
  c.rope_dim = get(t, "qk_rope_head_dim", 64);
  c.q_lora_rank = get(t, "q_lora_rank", 1280);
  c.o_groups = get(t, "o_groups", 8);
  c.o_lora_rank = get(t, "o_lora_rank", 1024);
  c.sliding_window = get(t, "sliding_window", 128);
  c.index_n_heads = get(t, "index_n_heads", 64);
  c.index_head_dim = get(t, "index_head_dim", 128);
  c.index_topk = get(t, "index_topk", 512);
  c.candidate_source = get(t, "candidate_source_layer_id", -1);
  c.candidate_topk_blocks = get(t, "candidate_topk_blocks", 2048);
  c.candidate_block_size = get(t, "candidate_block_size", 8);
  c.n_experts = get(t, "n_routed_experts", 384);
  c.top_k = get(t, "num_experts_per_tok", 6);
  c.moe_inter = get(t, "moe_intermediate_size", int64_t{2304});
  c.routed_scaling = get(t, "routed_scaling_factor", 1.5f);
  c.gate_temp = get(t, "gate_temp", 1.0f);
  c.swiglu_limit = get(t, "swiglu_limit", 10.0f);
  c.hc_mult = get(t, "hc_mult", 4);
  c.hc_sinkhorn_iters = get(t, "hc_sinkhorn_iters", 20);
  c.hc_eps = get(t, "hc_eps", 1e-6f);
  c.rms_eps = get(t, "rms_norm_eps", 1e-20f);
  c.max_position = get(t, "max_position_embeddings", int64_t{1048576});
  c.num_mtp_layers = get(t, "num_nextn_predict_layers", 0);
  const std::string scoring = get(t, "scoring_func", std::string("sqrtsoftplus"));
  if (scoring != "sqrtsoftplus")
    return unsupported(
        "{}: scoring_func '{}' is not supported for deepseek_v41 (supported: sqrtsoftplus)", path,
        scoring);
  if (get(t, "n_shared_experts", 1) != 1)
    return unsupported("{}: n_shared_experts must be 1 for deepseek_v41", path);
  if (get(t, "num_key_value_heads", 1) != 1)
    return unsupported("{}: num_key_value_heads must be 1 for deepseek_v41 (one shared K=V head)",
                       path);
  if (get(t, "num_hash_layers", 0) != 0)
    return unsupported(
        "{}: num_hash_layers must be 0 for deepseek_v41 (it has no hash-routed layers)", path);
  c.kv_sources = get(t, "kv_source_layer_ids", std::vector<int>());
  c.index_sources = get(t, "index_source_layer_ids", std::vector<int>());
  V41EngramConfig& e = c.engram;
  e.layers = get(t, "engram_layer_ids", std::vector<int>());
  e.max_ngram = get(t, "engram_max_ngram_size", 4);
  e.n_heads = get(t, "engram_n_heads", 0);
  e.head_dim = get(t, "engram_head_dim", 0);
  e.vocab_size = get(t, "engram_vocab_size", std::vector<int64_t>());
  e.pad_token_id = get(t, "engram_pad_token_id", 2);
  return parse_rope(t, c, path);
}

// quantization_config (FP8 e4m3, ue8m0 scales, square blocks of 32 or 128) and expert_dtype.
Status parse_quantization(const json& j, DeepseekV41Config& c, const std::string& path) {
  if (auto it = j.find("quantization_config"); it != j.end() && !it->is_null()) {
    const std::string method = get(*it, "quant_method", std::string());
    const std::vector<int> block = get(*it, "weight_block_size", std::vector<int>());
    if (method != "fp8" || block.size() != 2 || block[0] != block[1] ||
        (block[0] != 32 && block[0] != 128))
      return unsupported(
          "{}: quantization_config {} is not supported for deepseek_v41 (quant_method \"fp8\" with "
          "weight_block_size [32, 32] or [128, 128])",
          path, it->dump());
    c.fp8_block = block[0];
  }
  const std::string experts = get(j, "expert_dtype", std::string());
  if (!experts.empty() && experts != "fp4" && experts != "fp8" && experts != "bf16")
    return unsupported("{}: expert_dtype '{}' is not supported (bf16, fp8 or fp4)", path, experts);
  c.fp4_experts = experts == "fp4";
  return Status::ok();
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The latest entry of ascending `sources` at or below `layer`, or -1.
int latest(const std::vector<int>& sources, int layer) {
  int found = -1;
  for (int s : sources)
    if (s <= layer) found = s;
  return found;
}

Status check_layer_list(const std::vector<int>& v, const char* field, int num_layers,
                        const std::string& path) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= num_layers)
      return corrupt("{}: {} holds layer {} (the model has layers 0..{})", path, field, v[i],
                     num_layers - 1);
    if (i > 0 && v[i] <= v[i - 1]) return corrupt("{}: {} must be strictly ascending", path, field);
  }
  return Status::ok();
}

// compress_ratios and the source lists -> V41Layer per layer, refusing every layout whose roles
// would be ambiguous (DeepSeek's code raises on the same ones: a compressed layer below every
// source, a reader whose ratio differs from its source's).
Status derive_roles(const json& t, DeepseekV41Config& c, const std::string& path) {
  const std::vector<int> ratios = get(t, "compress_ratios", std::vector<int>());
  if (static_cast<int>(ratios.size()) < c.num_layers)
    return corrupt("{}: compress_ratios has {} entries for {} layers", path, ratios.size(),
                   c.num_layers);
  DI_RETURN_IF_ERROR(check_layer_list(c.kv_sources, "kv_source_layer_ids", c.num_layers, path));
  DI_RETURN_IF_ERROR(
      check_layer_list(c.index_sources, "index_source_layer_ids", c.num_layers, path));
  DI_RETURN_IF_ERROR(check_layer_list(c.engram.layers, "engram_layer_ids", c.num_layers, path));
  if (c.candidate_source != -1 && !contains(c.index_sources, c.candidate_source))
    return corrupt("{}: candidate_source_layer_id {} is not an index source", path,
                   c.candidate_source);
  c.layers.assign(c.num_layers, V41Layer{});
  for (int i = 0; i < c.num_layers; ++i) {
    V41Layer& L = c.layers[i];
    L.ratio = ratios[i];
    L.engram = contains(c.engram.layers, i);
    const bool kv_src = contains(c.kv_sources, i), idx_src = contains(c.index_sources, i);
    if (L.ratio == 0) {
      if (kv_src || idx_src)
        return corrupt("{}: layer {} is a KV or index source but compress_ratios[{}] is 0", path, i,
                       i);
      continue;
    }
    if (L.ratio != 1 && L.ratio != 2)
      return unsupported("{}: compress_ratios[{}] = {} (deepseek_v41 compresses by 1 or 2)", path,
                         i, L.ratio);
    L.kv_source = latest(c.kv_sources, i);
    L.index_source = latest(c.index_sources, i);
    if (L.kv_source < 0 || L.index_source < 0)
      return corrupt("{}: layer {} compresses but no KV source and index source is at or below it",
                     path, i);
    if (ratios[L.kv_source] != L.ratio)
      return corrupt("{}: layer {} (ratio {}) would read the compressed KV of layer {} (ratio {})",
                     path, i, L.ratio, L.kv_source, ratios[L.kv_source]);
    // (Also guarantees that every KV source is an index source, whose indexer makes the keys
    // that later index sources score.)
    if (L.index_source < L.kv_source)
      return corrupt(
          "{}: layer {} would reuse the top-k of layer {}, made over an older KV source than its "
          "own "
          "(layer {})",
          path, i, L.index_source, L.kv_source);
    L.owns_compressor = kv_src;
    L.runs_indexer = idx_src;
    L.publishes_candidates = i == c.candidate_source;
    L.uses_candidates = idx_src && c.candidate_source >= 0 && c.candidate_source < i;
    if (L.uses_candidates && ratios[c.candidate_source] > L.ratio)
      return corrupt(
          "{}: layer {} (ratio {}) would select within the candidate blocks of layer {} (ratio {})",
          path, i, L.ratio, c.candidate_source, ratios[c.candidate_source]);
  }
  return Status::ok();
}

Status validate(const DeepseekV41Config& c, const std::string& path) {
  auto bad = [&](const char* field, int64_t v) {
    return corrupt("{}: '{}' = {} is invalid", path, field, v);
  };
  DI_RETURN_IF_ERROR(validate_v4_family_shape(c, path, "qk_rope_head_dim"));
  if (c.candidate_source >= 0 && c.candidate_topk_blocks <= 0)
    return bad("candidate_topk_blocks", c.candidate_topk_blocks);
  if (c.candidate_source >= 0 && c.candidate_block_size <= 0)
    return bad("candidate_block_size", c.candidate_block_size);
  if (!(c.gate_temp > 0.0f))
    return corrupt("{}: 'gate_temp' = {} is invalid (it must be positive)", path, c.gate_temp);
  const V41EngramConfig& e = c.engram;
  if (!e.layers.empty()) {
    if (e.max_ngram < 2 || e.max_ngram > 8) return bad("engram_max_ngram_size", e.max_ngram);
    if (e.n_heads <= 0) return bad("engram_n_heads", e.n_heads);
    if (e.head_dim <= 0) return bad("engram_head_dim", e.head_dim);
    if (static_cast<int>(e.vocab_size.size()) != e.max_ngram - 1)
      return corrupt("{}: engram_vocab_size has {} entries for n-grams 2..{}", path,
                     e.vocab_size.size(), e.max_ngram);
    for (int64_t v : e.vocab_size)
      if (v < 2 || v > (int64_t{1} << 40)) return bad("engram_vocab_size", v);
    if (e.pad_token_id < 0 || e.pad_token_id >= c.vocab_size)
      return bad("engram_pad_token_id", e.pad_token_id);
  }
  return Status::ok();
}

}  // namespace

Result<DeepseekV41Config> deepseek_v41_config_from_json(const std::string& path) {
  DeepseekV41Config c;
  DI_RETURN_IF_ERROR(hf::parse_config_file(path, [&](const json& j) -> Status {
    auto it = j.find("text_config");
    if (it == j.end() || !it->is_object())
      return corrupt("{}: a deepseek_v41 config needs a text_config object", path);
    DI_RETURN_IF_ERROR(parse_sizes(*it, c, path));
    DI_RETURN_IF_ERROR(parse_quantization(j, c, path));
    DI_RETURN_IF_ERROR(validate(c, path));
    return derive_roles(*it, c, path);
  }));
  return c;
}

}  // namespace deepinfer::model
