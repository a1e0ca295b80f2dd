// A model with its tokenizer, loaded from a .gguf file, a Hugging Face directory or a catalogue
// name: what the CLI subcommands and the Python package build an Engine from.
#pragma once

#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/vision/vision_encoder.h"

namespace deepinfer::engine {

struct LoadedModel {
  std::string name;  // short name or file name, for output records
  std::string path;  // the weights (file or directory); their content digest keys the KV store
  std::shared_ptr<const recipe::Tokenizer> tokenizer;
  std::unique_ptr<model::Model> model;
  // Multimodal (LLaVA-layout) models: the vision tower + projector; null for text-only models.
  std::shared_ptr<const vision::VisionEncoder> vision;
};

// `model_arg` as a .gguf file, a Hugging Face directory or a catalogue name ("" = default model).
Result<LoadedModel> load_model_with_tokenizer(const std::string& model_arg);

// The same model's tokenizer and configuration only, no weights (the entrypoint of a
// disaggregated deployment turns requests into tokens; engines elsewhere run the model).
struct ModelRecipe {
  std::string name;
  std::shared_ptr<const recipe::Tokenizer> tokenizer;
  model::ModelConfig config;
};
Result<ModelRecipe> load_tokenizer_and_config(const std::string& model_arg);

// `serve --role vision`: only a LLaVA-layout model's vision tower and projector (the language
// model's weights stay unread). An error names the model when it has no vision tower.
struct VisionOnly {
  std::string name;
  std::string path;  // the Hugging Face directory
  std::shared_ptr<const vision::VisionEncoder> encoder;
};
Result<VisionOnly> load_vision_encoder(const std::string& model_arg);

}  // namespace deepinfer::engine
