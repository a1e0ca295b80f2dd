#include "deepinfer/engine/loaded_model.h"

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model_path.h"

namespace deepinfer::engine {

Result<LoadedModel> load_model_with_tokenizer(const std::string& model_arg) {
  DI_ASSIGN_OR_RETURN(model::ResolvedModel resolved, model::resolve_model(model_arg));
  LoadedModel out;
  out.name = resolved.name;
  out.path = resolved.path;
  model::WeightSource source;
  source.description = resolved.path;
  if (resolved.kind == model::ResolvedModel::Kind::kGguf) {
    DI_ASSIGN_OR_RETURN(auto gguf, format::GgufFile::open(resolved.path));
    source.gguf = gguf;
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_gguf(*gguf));
    out.tokenizer = std::move(tok);
  } else {
    DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(resolved.path));
    source.safetensors = st;
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_hf_dir(resolved.path));
    out.tokenizer = std::move(tok);
    if (vision::is_llava_config(resolved.path + "/config.json")) {
      DI_ASSIGN_OR_RETURN(auto enc, vision::VisionEncoder::load(resolved.path, st));
      out.vision = std::move(enc);
    }
  }
  DI_ASSIGN_OR_RETURN(out.model, model::load_model(source));
  if (out.model->config().vocab_size < out.tokenizer->vocab_size())
    return corrupt("{}: the tokenizer has {} tokens but the model only {}", resolved.path,
                   out.tokenizer->vocab_size(), out.model->config().vocab_size);
  return out;
}

Result<ModelRecipe> load_tokenizer_and_config(const std::string& model_arg) {
  DI_ASSIGN_OR_RETURN(model::ResolvedModel resolved, model::resolve_model(model_arg));
  ModelRecipe out;
  out.name = resolved.name;
  if (resolved.kind == model::ResolvedModel::Kind::kGguf) {
    DI_ASSIGN_OR_RETURN(auto gguf, format::GgufFile::open(resolved.path));
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_gguf(*gguf));
    out.tokenizer = std::move(tok);
    DI_ASSIGN_OR_RETURN(out.config, model::config_from_gguf(*gguf));
  } else {
    DI_ASSIGN_OR_RETURN(auto tok, recipe::Tokenizer::from_hf_dir(resolved.path));
    out.tokenizer = std::move(tok);
    DI_ASSIGN_OR_RETURN(out.config, model::config_from_hf_json(resolved.path + "/config.json"));
  }
  if (out.config.vocab_size < out.tokenizer->vocab_size())
    return corrupt("{}: the tokenizer has {} tokens but the model only {}", resolved.path,
                   out.tokenizer->vocab_size(), out.config.vocab_size);
  return out;
}

Result<VisionOnly> load_vision_encoder(const std::string& model_arg) {
  DI_ASSIGN_OR_RETURN(model::ResolvedModel resolved, model::resolve_model(model_arg));
  if (resolved.kind == model::ResolvedModel::Kind::kGguf || !vision::is_llava_config(resolved.path + "/config.json"))
    return invalid_argument("{}: not a multimodal model (a LLaVA-layout Hugging Face directory is needed for a "
                            "vision encoder)", resolved.path);
  DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(resolved.path));
  VisionOnly out;
  out.name = resolved.name;
  out.path = resolved.path;
  DI_ASSIGN_OR_RETURN(auto enc, vision::VisionEncoder::load(resolved.path, st));
  out.encoder = std::move(enc);
  return out;
}

}  // namespace deepinfer::engine
