// Shared config.json reading: nullable ints, the RoPE block, file and type errors.
#include "deepinfer/model/hf_config_json.h"

#include <fstream>

#include "deepinfer/model/layers/linear.h"

namespace deepinfer::model::hf {

int nullable_int(const nlohmann::json& obj, const char* key, int dflt) {
  auto it = obj.find(key);
  if (it == obj.end()) return dflt;
  if (it->is_null()) return 0;
  if (!it->is_number_integer()) throw BadField{key};
  return it->get<int>();
}

const nlohmann::json* rope_block(const nlohmann::json& config) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = config.find(key);
    if (it != config.end() && it->is_object()) return &*it;
  }
  return nullptr;
}

RopeScalingConfig rope_scaling(const nlohmann::json& rs, float* theta, Null null) {
  if (auto t = rs.find("rope_theta"); t != rs.end() && t->is_number()) *theta = t->get<float>();
  RopeScalingConfig c;
  std::string type = field(rs, "rope_type", field(rs, "type", std::string("none"), null), null);
  if (type == "default") type = "none";
  c.type = type;
  c.factor = field(rs, "factor", 1.0f, null);
  c.low_freq_factor = field(rs, "low_freq_factor", 1.0f, null);
  c.high_freq_factor = field(rs, "high_freq_factor", 4.0f, null);
  c.original_max_position = field(rs, "original_max_position_embeddings", int64_t{0}, null);
  c.beta_fast = field(rs, "beta_fast", 32.0f, null);
  c.beta_slow = field(rs, "beta_slow", 1.0f, null);
  c.mscale = field(rs, "mscale", 1.0f, null);
  c.mscale_all_dim = field(rs, "mscale_all_dim", 0.0f, null);
  c.attention_factor = field(rs, "attention_factor", 0.0f, null);
  return c;
}

nlohmann::json read_json_lenient(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

Status check_fp8_block_quantization(const nlohmann::json& config, const std::string& dir) {
  if (!config.is_object() || !config.contains("quantization_config")) return Status::ok();
  const auto& q = config["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>()
                                 : std::string("?");
  const bool blocks_ok = q.is_object() && q.contains("weight_block_size") &&
                         q["weight_block_size"] == nlohmann::json::array({kFp8Block, kFp8Block});
  if (method != "fp8" || !blocks_ok)
    return unsupported("{}/config.json: unsupported quantization_config {} (supported: quant_method "
                       "\"fp8\" with weight_block_size [128, 128])", dir, q.dump());
  return Status::ok();
}

Status parse_config_file(const std::string& path, const std::function<Status(const nlohmann::json&)>& parse) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return corrupt("{}: invalid JSON: {}", path, e.what());
  }
  if (!j.is_object()) return corrupt("{}: expected a JSON object", path);
  try {
    return parse(j);
  } catch (const BadField& e) {
    return corrupt("{}: '{}' has the wrong type", path, e.key);
  } catch (const nlohmann::json::exception& e) {
    return corrupt("{}: a field has the wrong type: {}", path, e.what());
  }
}

}  // namespace deepinfer::model::hf
