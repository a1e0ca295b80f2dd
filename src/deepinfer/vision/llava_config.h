// The multimodal parts of a LLaVA-layout config.json (LlavaForConditionalGeneration): the
// SigLIP vision tower's sizes (vision_config), which hidden state feeds the projector, and the
// image placeholder token. The language model's own sizes (text_config) are read by
// model/model_config.cc like any Llama config.
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::vision {

struct VisionTowerConfig {
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int image_size = 0;
  int patch_size = 0;
  float layer_norm_eps = 1e-6f;
  int num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

struct LlavaConfig {
  VisionTowerConfig tower;
  int text_hidden_size = 0;
  int image_token_id = -1;
  // Index into the tower's hidden states (0 = patch embeddings, L = after layer L; negative
  // counts from the end, -1 = the last layer's output before post_layernorm).
  int feature_layer = -2;
  bool keep_first_token = true;  // vision_feature_select_strategy "full"; "default" drops it
  bool projector_bias = true;
  // The tower layer count needed: hidden state feature_layer, resolved (1..num_layers, or 0).
  int layers_to_run() const { return feature_layer < 0 ? tower.num_layers + 1 + feature_layer : feature_layer; }
  int tokens_per_image() const { return tower.num_patches() - (keep_first_token ? 0 : 1); }
};

// True when `config_json_path` is a LLaVA-layout config (model_type "llava"); false for any
// other model and for unreadable files (the text loader reports those).
bool is_llava_config(const std::string& config_json_path);

// The multimodal fields of a "llava" config.json. Towers other than SigLIP, list-valued
// vision_feature_layer and projector activations other than GELU are refused naming them.
Result<LlavaConfig> read_llava_config(const std::string& config_json_path);

}  // namespace deepinfer::vision
