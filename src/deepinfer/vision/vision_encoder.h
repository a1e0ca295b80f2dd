// A LLaVA-layout image encoder: SigLIP ViT tower (patch embedding, position embedding, pre-norm
// encoder layers) up to the configured hidden state, feature selection, then the two-layer GELU
// projector into the language model's embedding space. One image in, tokens_per_image rows of
// text_hidden_size floats out: the input embeddings of that image's placeholder tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"
#include "deepinfer/vision/llava_config.h"
#include "deepinfer/vision/preprocess.h"

namespace deepinfer::format {
class SafetensorsModel;
}

namespace deepinfer::vision {

struct TowerWeights;

class VisionEncoder {
 public:
  ~VisionEncoder();
  // Reads config.json, preprocessor_config.json and the safetensors weights of a Hugging Face
  // LLaVA directory (tensor names as transformers 4.x or 5.x write them).
  static Result<std::unique_ptr<VisionEncoder>> load(const std::string& dir,
                                                     std::shared_ptr<const format::SafetensorsModel> weights);

  const LlavaConfig& config() const { return config_; }
  const ImageProcessorConfig& processor() const { return processor_; }
  int tokens_per_image() const { return config_.tokens_per_image(); }
  int image_token_id() const { return config_.image_token_id; }
  int embedding_size() const { return config_.text_hidden_size; }

  // pixel_values [3, image_size, image_size] (preprocess_image's output) -> embeddings
  // [tokens_per_image, text_hidden_size]. Thread-compatible: one call at a time.
  Result<std::vector<float>> encode(const std::vector<float>& pixel_values, model::ForwardContext& ctx) const;

 private:
  VisionEncoder() = default;
  LlavaConfig config_;
  ImageProcessorConfig processor_;
  std::unique_ptr<TowerWeights> w_;
};

}  // namespace deepinfer::vision
