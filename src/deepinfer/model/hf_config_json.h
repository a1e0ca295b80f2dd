// Reading a Hugging Face config.json, shared by every architecture's config parser
// (model_config.cc for llama / deepseek_v3, deepseek_v4_config.cc): typed fields whose wrong type
// becomes an error naming the key, the RoPE block ("rope_parameters" or legacy "rope_scaling"),
// and the file-level errors (cannot open, invalid JSON, wrong type) worded the same everywhere.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model_config.h"

namespace deepinfer::model::hf {

// A config.json key present with the wrong type (e.g. "rms_norm_eps": "small"). Thrown by
// field(), turned into a Status by parse_config_file().
struct BadField {
  std::string key;
};

// What a JSON null means for a field: a wrong type (llama / deepseek_v3: transformers never
// writes null there) or "not given" (deepseek_v4 follows transformers' __post_init__ defaults).
enum class Null { kWrongType, kDefault };

// obj[key] as T, dflt when absent; a present value of the wrong type throws BadField naming key.
template <typename T>
T field(const nlohmann::json& obj, const char* key, T dflt, Null null = Null::kWrongType) {
  auto it = obj.find(key);
  if (it == obj.end() || (null == Null::kDefault && it->is_null())) return dflt;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw BadField{key};
  }
}

// Integer field that may be null (DeepSeek's "q_lora_rank": null means no LoRA): null -> 0.
int nullable_int(const nlohmann::json& obj, const char* key, int dflt);

// The RoPE block of a config: "rope_parameters" (transformers 5.x, also holding rope_theta) when
// it is an object, else "rope_scaling"; nullptr when neither is an object.
const nlohmann::json* rope_block(const nlohmann::json& config);

// The scaling fields of a RoPE block (rope_type or type, "default" read as "none"; factor,
// llama3's low/high_freq_factor, original_max_position_embeddings, YaRN's beta_fast/slow,
// mscale, mscale_all_dim, attention_factor). A rope_theta in the block overrides *theta.
RopeScalingConfig rope_scaling(const nlohmann::json& block, float* theta, Null null = Null::kWrongType);

// `path` parsed, or a discarded value when it cannot be read or parsed (for second looks at a
// config.json that config_from_hf_json has already validated).
nlohmann::json read_json_lenient(const std::string& path);

// quantization_config of `config` (the config.json of directory `dir`): absent, or FP8 e4m3 with
// 128x128 block scales (DeepSeek's checkpoints); anything else is refused naming it.
Status check_fp8_block_quantization(const nlohmann::json& config, const std::string& dir);

// Opens and parses `path` (a JSON object) and runs `parse` on it; BadField and JSON type errors
// thrown by parse become Statuses naming the file and the key.
Status parse_config_file(const std::string& path, const std::function<Status(const nlohmann::json&)>& parse);

}  // namespace deepinfer::model::hf
