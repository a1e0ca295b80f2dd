#include "deepinfer/model/model_config.h"

#include <nlohmann/json.hpp>

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/hf_config_json.h"

namespace deepinfer::model {
namespace {

// Positive integer metadata key, or a Status naming the file and the key.
Result<int64_t> required_int(const format::GgufFile& g, const std::string& key, int64_t max) {
  auto v = g.get_int(key);
  if (!v) return corrupt("{}: missing metadata key '{}'", g.path(), key);
  if (*v <= 0 || *v > max) return corrupt("{}: metadata '{}' = {} is out of range", g.path(), key, *v);
  return *v;
}

}  // namespace

Result<ModelConfig> config_from_gguf(const format::GgufFile& g) {
  ModelConfig c;
  auto arch = g.get_string("general.architecture");
  if (!arch) return corrupt("{}: missing metadata key 'general.architecture'", g.path());
  c.architecture = *arch;
  c.name = g.get_string("general.name").value_or(*arch);
  const std::string a = *arch + ".";
  DI_ASSIGN_OR_RETURN(c.hidden_size, required_int(g, a + "embedding_length", 1 << 20));
  DI_ASSIGN_OR_RETURN(int64_t layers, required_int(g, a + "block_count", 4096));
  DI_ASSIGN_OR_RETURN(int64_t heads, required_int(g, a + "attention.head_count", 4096));
  DI_ASSIGN_OR_RETURN(c.intermediate_size, required_int(g, a + "feed_forward_length", 1 << 22));
  c.num_layers = static_cast<int>(layers);
  c.num_heads = static_cast<int>(heads);
  c.num_kv_heads = static_cast<int>(g.get_int(a + "attention.head_count_kv").value_or(heads));
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    return corrupt("{}: attention.head_count_kv = {} does not divide head_count = {}", g.path(),
                   c.num_kv_heads, c.num_heads);
  if (c.hidden_size % c.num_heads != 0)
    return corrupt("{}: embedding_length {} is not a multiple of head_count {}", g.path(),
                   c.hidden_size, c.num_heads);
  c.head_dim = static_cast<int>(g.get_int(a + "attention.key_length").value_or(c.hidden_size / c.num_heads));
  c.rope_dim = static_cast<int>(g.get_int(a + "rope.dimension_count").value_or(c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2)
    return corrupt("{}: rope.dimension_count {} is invalid for head size {}", g.path(), c.rope_dim, c.head_dim);
  c.max_position = g.get_int(a + "context_length").value_or(4096);
  c.rms_norm_eps = static_cast<float>(g.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(g.get_float(a + "rope.freq_base").value_or(10000.0));
  c.rope_pairing = RopePairing::kInterleaved;
  if (auto type = g.get_string(a + "rope.scaling.type"); type && *type != "none") {
    c.rope_scaling.type = *type;
    c.rope_scaling.factor = static_cast<float>(g.get_float(a + "rope.scaling.factor").value_or(1.0));
    c.rope_scaling.original_max_position =
        g.get_int(a + "rope.scaling.original_context_length").value_or(c.max_position);
  }
  if (auto* toks = g.get_string_array("tokenizer.ggml.tokens")) c.vocab_size = static_cast<int64_t>(toks->size());
  c.vocab_size = g.get_int(a + "vocab_size").value_or(c.vocab_size);
  if (c.vocab_size <= 0) return corrupt("{}: vocabulary size unknown (no {}vocab_size, no tokens)", g.path(), a);
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  return c;
}

namespace {

using hf::field;
using hf::nullable_int;

// MLA, DeepSeekMoE and MTP fields of a deepseek_v3 config.json.
Status parse_deepseek_fields(const nlohmann::json& j, ModelConfig& c, const std::string& path) {
  c.q_lora_rank = nullable_int(j, "q_lora_rank", 0);
  c.kv_lora_rank = field(j, "kv_lora_rank", 0);
  c.qk_nope_head_dim = field(j, "qk_nope_head_dim", 0);
  c.qk_rope_head_dim = field(j, "qk_rope_head_dim", 0);
  c.v_head_dim = field(j, "v_head_dim", 0);
  c.n_routed_experts = nullable_int(j, "n_routed_experts", 0);
  c.n_shared_experts = nullable_int(j, "n_shared_experts", 0);
  c.num_experts_per_tok = nullable_int(j, "num_experts_per_tok", 0);
  c.moe_intermediate_size = field(j, "moe_intermediate_size", int64_t{0});
  c.first_k_dense_replace = nullable_int(j, "first_k_dense_replace", 0);
  c.moe_layer_freq = field(j, "moe_layer_freq", 1);
  c.n_group = nullable_int(j, "n_group", 1);
  c.topk_group = nullable_int(j, "topk_group", 1);
  c.norm_topk_prob = field(j, "norm_topk_prob", true);
  c.routed_scaling_factor = field(j, "routed_scaling_factor", 1.0f);
  c.scoring_func = field(j, "scoring_func", std::string("sigmoid"));
  c.topk_method = field(j, "topk_method", std::string("noaux_tc"));
  c.num_nextn_predict_layers = field(j, "num_nextn_predict_layers", 0);
  c.rope_pairing = field(j, "rope_interleave", true) ? RopePairing::kInterleaved : RopePairing::kHalf;
  if (c.q_lora_rank < 0 || c.kv_lora_rank <= 0 || c.qk_nope_head_dim <= 0 || c.qk_rope_head_dim <= 0 ||
      c.qk_rope_head_dim % 2 != 0 || c.v_head_dim <= 0)
    return corrupt("{}: invalid MLA sizes (q_lora_rank {}, kv_lora_rank {}, qk_nope_head_dim {}, "
                   "qk_rope_head_dim {} (must be even), v_head_dim {})", path, c.q_lora_rank,
                   c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim);
  if (c.n_routed_experts < 0 || c.n_shared_experts < 0 || c.first_k_dense_replace < 0 ||
      c.moe_layer_freq <= 0 || c.num_nextn_predict_layers < 0)
    return corrupt("{}: negative MoE sizes", path);
  if (c.n_routed_experts > 0) {
    if (c.moe_intermediate_size <= 0 || c.num_experts_per_tok <= 0 || c.n_group <= 0 ||
        c.n_routed_experts % c.n_group != 0 || c.topk_group <= 0 || c.topk_group > c.n_group ||
        c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
      return corrupt("{}: inconsistent MoE routing (n_routed_experts {}, n_group {}, topk_group {}, "
                     "num_experts_per_tok {}, moe_intermediate_size {})", path, c.n_routed_experts,
                     c.n_group, c.topk_group, c.num_experts_per_tok, c.moe_intermediate_size);
  }
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  c.rope_dim = c.qk_rope_head_dim;
  return Status::ok();
}

// Fields of an already parsed config.json; throws hf::BadField, which hf::parse_config_file turns
// into a Status.
Result<ModelConfig> parse_hf_config(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return corrupt("{}: expected a JSON object", path);
  auto get_int = [&](const char* key, int64_t dflt) -> int64_t {
    auto it = j.find(key);
    return (it != j.end() && it->is_number_integer()) ? it->get<int64_t>() : dflt;
  };
  ModelConfig c;
  std::string model_type = field(j, "model_type", std::string());
  if (model_type.empty()) return corrupt("{}: missing 'model_type'", path);
  // V4.1 nests its text model under text_config; its loader (deepseek_v41.cc) reads the rest.
  if (model_type == "deepseek_v41") {
    if (!j.contains("text_config") || !j["text_config"].is_object())
      return corrupt("{}: a deepseek_v41 config needs a text_config object", path);
    nlohmann::json text = j["text_config"];
    text["model_type"] = "deepseek_v41_text";
    DI_ASSIGN_OR_RETURN(ModelConfig t, parse_hf_config(text, path));
    t.architecture = "deepseek_v41";
    t.name = "deepseek_v41";
    return t;
  }
  // LLaVA: the language model's sizes are text_config's (the vision tower is vision/'s).
  if (model_type == "llava") {
    if (!j.contains("text_config") || !j["text_config"].is_object())
      return corrupt("{}: a llava config needs a text_config object", path);
    DI_ASSIGN_OR_RETURN(ModelConfig text, parse_hf_config(j["text_config"], path));
    if (text.architecture != "llama")
      return unsupported("{}: llava text model '{}' is not supported (supported: llama)", path, text.name);
    text.architecture = "llava";
    text.name = "llava";
    return text;
  }
  // Llama-family checkpoints share one architecture implementation.
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") {
    c.architecture = "llama";
    c.attention_bias = model_type == "qwen2" || field(j, "attention_bias", false);
  } else {
    c.architecture = model_type;
  }
  c.name = model_type;
  c.vocab_size = get_int("vocab_size", 0);
  c.hidden_size = get_int("hidden_size", 0);
  c.intermediate_size = get_int("intermediate_size", 0);
  c.num_layers = static_cast<int>(get_int("num_hidden_layers", 0));
  c.num_heads = static_cast<int>(get_int("num_attention_heads", 0));
  c.num_kv_heads = static_cast<int>(get_int("num_key_value_heads", c.num_heads));
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 || c.hidden_size % c.num_heads != 0)
    return corrupt("{}: inconsistent sizes (vocab_size, hidden_size, num_hidden_layers, "
                   "num_attention_heads, num_key_value_heads)", path);
  c.head_dim = static_cast<int>(get_int("head_dim", c.hidden_size / c.num_heads));
  c.rope_dim = c.head_dim;
  c.max_position = get_int("max_position_embeddings", 4096);
  c.rms_norm_eps = field(j, "rms_norm_eps", 1e-5f);
  c.rope_theta = field(j, "rope_theta", 10000.0f);
  c.rope_pairing = RopePairing::kHalf;
  c.tie_word_embeddings = field(j, "tie_word_embeddings", false);
  // Newer transformers (5.x) write "rope_parameters" holding rope_theta and the scaling fields;
  // older ones write top-level "rope_theta" and "rope_scaling". Accept both.
  if (const nlohmann::json* rs = hf::rope_block(j)) c.rope_scaling = hf::rope_scaling(*rs, &c.rope_theta);
  if (c.architecture == "deepseek_v3") DI_RETURN_IF_ERROR(parse_deepseek_fields(j, c, path));
  return c;
}

}  // namespace

Result<ModelConfig> config_from_hf_json(const std::string& path) {
  ModelConfig c;
  DI_RETURN_IF_ERROR(hf::parse_config_file(path, [&](const nlohmann::json& j) -> Status {
    DI_ASSIGN_OR_RETURN(c, parse_hf_config(j, path));
    return Status::ok();
  }));
  return c;
}

}  // namespace deepinfer::model
