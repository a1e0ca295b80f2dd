// config.json -> DeepseekV4Config, following transformers' DeepseekV4Config.__post_init__ for
// defaults and legacy fields (the reference wins over DEEPSEEK_V4.md where they differ).
#include "deepinfer/model/deepseek_v4_config.h"

#include <map>
#include <nlohmann/json.hpp>

#include "deepinfer/model/hf_config_json.h"
#include "deepinfer/model/layers/rope_scaling.h"

namespace deepinfer::model {
namespace {

using nlohmann::json;

// A present field; null reads as "not given" (transformers' defaults), a wrong type is an error
// naming the key.
template <typename T>
T get(const json& j, const char* key, T dflt) {
  return hf::field(j, key, dflt, hf::Null::kDefault);
}

// rope_parameters sub-dict (or legacy rope_scaling) -> theta + scaling, read and translated by the
// shared RoPE code; V4 takes YaRN only. `attention_factor` defaults to 1 for YaRN: V4 blends
// frequencies only, no cos/sin mscale (transformers forces it).
Status parse_rope(const json& rp, float* theta, kernels::RopeScaling* s, const std::string& path) {
  if (!rp.is_object()) return Status::ok();
  const RopeScalingConfig rs = hf::rope_scaling(rp, theta, hf::Null::kDefault);
  if (rs.type == "none") return Status::ok();
  if (rs.type != "yarn")
    return unsupported(
        "{}: rope type '{}' is not supported for deepseek_v4 (supported: default, yarn)", path,
        rs.type);
  DI_ASSIGN_OR_RETURN(*s, rope_scaling_from_config(rs, path, "deepseek_v4"));
  // transformers sets attention_factor = 1 for V4 unless given, and then YaRN's mscale /
  // mscale_all_dim (which DeepSeek's configs may carry) change nothing: ignored here too.
  if (auto it = rp.find("attention_factor"); it == rp.end() || it->is_null()) s->attention_factor = 1.0f;
  s->mscale = 1.0f;
  s->mscale_all_dim = 0.0f;
  return Status::ok();
}

// layer_types (transformers) or compress_ratios (legacy, per layer 0/4/128, MTP entries after).
Status parse_layer_kinds(const json& j, DeepseekV4Config& c, const std::string& path) {
  std::map<std::string, int> rates = {{"compressed_sparse_attention", 4},
                                      {"heavily_compressed_attention", 128}};
  if (auto it = j.find("compress_rates"); it != j.end() && it->is_object())
    for (auto& [k, v] : it->items()) rates[k] = v.get<int>();
  rates["compressed_sparse_attention"] =
      get(j, "compress_rate_csa", rates["compressed_sparse_attention"]);
  rates["heavily_compressed_attention"] =
      get(j, "compress_rate_hca", rates["heavily_compressed_attention"]);
  std::vector<std::string> types = get(j, "layer_types", std::vector<std::string>());
  if (types.empty() && j.contains("compress_ratios")) {
    for (int r : get(j, "compress_ratios", std::vector<int>())) {
      if (r != 0 && r != 4 && r != 128)
        return unsupported("{}: compress_ratios holds {} (a legacy config maps only 0, 4 and 128)",
                           path, r);
      types.push_back(r == 0   ? "sliding_attention"
                      : r == 4 ? "compressed_sparse_attention"
                               : "heavily_compressed_attention");
    }
  }
  if (types.empty()) {  // transformers' default: 2 HCA, then CSA/HCA alternating
    for (int i = 0; i < c.num_layers; ++i)
      types.push_back(i < 2 || i % 2 == 0 ? "heavily_compressed_attention"
                                          : "compressed_sparse_attention");
  }
  if (static_cast<int>(types.size()) < c.num_layers)
    return corrupt("{}: layer_types has {} entries for {} layers", path, types.size(),
                   c.num_layers);
  std::vector<std::string> mlp = get(j, "mlp_layer_types", std::vector<std::string>());
  if (mlp.empty()) {
    const int n_hash = get(j, "num_hash_layers", 3);
    for (int i = 0; i < c.num_layers; ++i) mlp.push_back(i < n_hash ? "hash_moe" : "moe");
  }
  if (static_cast<int>(mlp.size()) < c.num_layers)
    return corrupt("{}: mlp_layer_types has {} entries for {} layers", path, mlp.size(),
                   c.num_layers);
  c.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    V4Layer& L = c.layers[i];
    if (types[i] == "sliding_attention") {
      L.attn = V4Attn::kWindow;
    } else if (types[i] == "compressed_sparse_attention" ||
               types[i] == "heavily_compressed_attention") {
      L.attn = types[i] == "compressed_sparse_attention" ? V4Attn::kCsa : V4Attn::kHca;
      L.ratio = rates[types[i]];
      if (L.ratio <= 0 || L.ratio > 4096)
        return corrupt("{}: compress rate {} for {} is out of range", path, L.ratio, types[i]);
    } else {
      return unsupported("{}: layer_types[{}] = '{}' is not a deepseek_v4 attention type", path, i,
                         types[i]);
    }
    if (mlp[i] != "hash_moe" && mlp[i] != "moe")
      return unsupported("{}: mlp_layer_types[{}] = '{}' is not a deepseek_v4 MoE type", path, i,
                         mlp[i]);
    L.hash_moe = mlp[i] == "hash_moe";
  }
  return Status::ok();
}

Status parse_fields(const json& j, DeepseekV4Config& c, const std::string& path) {
  c.vocab_size = get(j, "vocab_size", int64_t{129280});
  c.hidden = get(j, "hidden_size", int64_t{4096});
  c.num_layers = get(j, "num_hidden_layers", 43);
  c.n_heads = get(j, "num_attention_heads", 64);
  const int kv_heads = get(j, "num_key_value_heads", 1);
  if (kv_heads != 1)
    return unsupported("{}: num_key_value_heads {} (deepseek_v4 shares one KV head)", path,
                       kv_heads);
  c.head_dim = get(j, "head_dim", 512);
  c.q_lora_rank = get(j, "q_lora_rank", 1024);
  c.o_groups = get(j, "o_groups", 8);
  c.o_lora_rank = get(j, "o_lora_rank", 1024);
  c.sliding_window = get(j, "sliding_window", 128);
  c.index_n_heads = get(j, "index_n_heads", 64);
  c.index_head_dim = get(j, "index_head_dim", 128);
  c.index_topk = get(j, "index_topk", 512);
  c.n_experts = get(j, "n_routed_experts", 256);
  c.top_k = get(j, "num_experts_per_tok", 6);
  c.moe_inter = get(j, "moe_intermediate_size", int64_t{2048});
  c.n_shared = get(j, "n_shared_experts", 1);
  c.routed_scaling = get(j, "routed_scaling_factor", 1.5f);
  c.swiglu_limit = get(j, "swiglu_limit", 10.0f);
  c.hc_mult = get(j, "hc_mult", 4);
  c.hc_sinkhorn_iters = get(j, "hc_sinkhorn_iters", 20);
  c.hc_eps = get(j, "hc_eps", 1e-6f);
  c.rms_eps = get(j, "rms_norm_eps", 1e-6f);
  c.max_position = get(j, "max_position_embeddings", int64_t{1048576});
  c.num_mtp_layers = get(j, "num_nextn_predict_layers", 1);
  c.tie_embeddings = get(j, "tie_word_embeddings", false);
  const std::string scoring = get(j, "scoring_func", std::string("sqrtsoftplus"));
  if (scoring != "sqrtsoftplus")
    return unsupported(
        "{}: scoring_func '{}' is not supported for deepseek_v4 (supported: sqrtsoftplus)", path,
        scoring);
  // rope_dim: partial_rotary_factor * head_dim, or legacy qk_rope_head_dim (default 64/512).
  const double prf = get(j, "partial_rotary_factor", -1.0);
  const int legacy_rope = get(j, "qk_rope_head_dim", 0);
  c.rope_dim = prf > 0           ? static_cast<int>(c.head_dim * prf)
               : legacy_rope > 0 ? legacy_rope
                                 : c.head_dim / 8;
  c.main_theta = get(j, "rope_theta", 10000.0f);
  c.compress_theta = get(j, "compress_rope_theta", 160000.0f);
  const json* rp = hf::rope_block(j);
  if (rp && rp->contains("main") && rp->contains("compress")) {
    DI_RETURN_IF_ERROR(parse_rope((*rp)["main"], &c.main_theta, &c.main_scaling, path));
    DI_RETURN_IF_ERROR(parse_rope((*rp)["compress"], &c.compress_theta, &c.compress_scaling, path));
  } else if (rp) {
    // Flat form: the scaling applies to the compressed layers only; window layers keep plain RoPE.
    float ignored = c.compress_theta;
    DI_RETURN_IF_ERROR(parse_rope(*rp, &ignored, &c.compress_scaling, path));
  }
  return parse_layer_kinds(j, c, path);
}

Status validate(const DeepseekV4Config& c, const std::string& path) {
  if (c.n_shared != 1)
    return unsupported("{}: n_shared_experts {} (deepseek_v4 has exactly one shared expert)", path,
                       c.n_shared);
  return validate_v4_family_shape(c, path, "partial_rotary_factor (rope channels)");
}

}  // namespace

Result<DeepseekV4Config> deepseek_v4_config_from_json(const std::string& path) {
  DeepseekV4Config c;
  DI_RETURN_IF_ERROR(hf::parse_config_file(path, [&](const json& j) { return parse_fields(j, c, path); }));
  DI_RETURN_IF_ERROR(validate(c, path));
  return c;
}

}  // namespace deepinfer::model
