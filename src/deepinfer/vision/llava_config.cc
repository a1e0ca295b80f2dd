// Parsing of the LLaVA config fields; transformers' defaults where a field is absent.
#include "deepinfer/vision/llava_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace deepinfer::vision {
namespace {

Result<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return corrupt("{}: invalid JSON: {}", path, e.what());
  }
}

Status parse(const nlohmann::json& j, LlavaConfig& c, const std::string& path) {
  const nlohmann::json& v = j.at("vision_config");
  const std::string vtype = v.value("model_type", std::string());
  if (vtype != "siglip_vision_model")
    return unsupported("{}: vision tower '{}' is not supported (supported: siglip_vision_model)", path, vtype);
  const std::string act = v.value("hidden_act", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    return unsupported("{}: vision hidden_act '{}' is not supported (supported: gelu_pytorch_tanh)", path, act);
  VisionTowerConfig& t = c.tower;
  t.hidden_size = v.value("hidden_size", 768);
  t.intermediate_size = v.value("intermediate_size", 3072);
  t.num_layers = v.value("num_hidden_layers", 12);
  t.num_heads = v.value("num_attention_heads", 12);
  t.image_size = v.value("image_size", 224);
  t.patch_size = v.value("patch_size", 16);
  t.layer_norm_eps = v.value("layer_norm_eps", 1e-6f);
  if (v.value("num_channels", 3) != 3) return unsupported("{}: vision num_channels must be 3", path);
  if (t.hidden_size <= 0 || t.num_heads <= 0 || t.hidden_size % t.num_heads != 0 || t.num_layers <= 0 ||
      t.patch_size <= 0 || t.image_size < t.patch_size || t.image_size % t.patch_size != 0 || t.intermediate_size <= 0)
    return corrupt("{}: inconsistent vision_config sizes", path);
  const nlohmann::json& text = j.at("text_config");
  c.text_hidden_size = text.value("hidden_size", 4096);
  c.image_token_id = j.contains("image_token_id") && j["image_token_id"].is_number_integer()
                         ? j["image_token_id"].get<int>()
                         : j.value("image_token_index", 32000);
  if (j.contains("vision_feature_layer") && !j["vision_feature_layer"].is_number_integer())
    return unsupported("{}: a list-valued vision_feature_layer is not supported", path);
  c.feature_layer = j.value("vision_feature_layer", -2);
  const std::string strategy = j.value("vision_feature_select_strategy", std::string("default"));
  if (strategy != "default" && strategy != "full")
    return unsupported("{}: vision_feature_select_strategy '{}' is not supported", path, strategy);
  c.keep_first_token = strategy == "full";
  const std::string pact = j.value("projector_hidden_act", std::string("gelu"));
  if (pact != "gelu") return unsupported("{}: projector_hidden_act '{}' is not supported (supported: gelu)", path, pact);
  c.projector_bias = j.value("multimodal_projector_bias", true);
  const int run = c.layers_to_run();
  if (run < 0 || run > t.num_layers)
    return corrupt("{}: vision_feature_layer {} is outside the tower's {} layers", path, c.feature_layer, t.num_layers);
  if (c.tokens_per_image() <= 0) return corrupt("{}: the image yields no tokens", path);
  return Status::ok();
}

}  // namespace

bool is_llava_config(const std::string& config_json_path) {
  Result<nlohmann::json> j = read_json(config_json_path);
  return j.is_ok() && j->is_object() && j->value("model_type", std::string()) == "llava";
}

Result<LlavaConfig> read_llava_config(const std::string& path) {
  DI_ASSIGN_OR_RETURN(nlohmann::json j, read_json(path));
  LlavaConfig c;
  try {
    if (!j.is_object() || !j.contains("vision_config") || !j.contains("text_config"))
      return corrupt("{}: a llava config needs vision_config and text_config", path);
    DI_RETURN_IF_ERROR(parse(j, c, path));
  } catch (const nlohmann::json::exception& e) {
    return corrupt("{}: invalid llava config: {}", path, e.what());
  }
  return c;
}

}  // namespace deepinfer::vision
