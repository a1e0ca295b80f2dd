// The language model of a LLaVA-layout checkpoint (LlavaForConditionalGeneration): a Llama whose
// tensors are nested under language_model.* (transformers < 4.52) or model.language_model.* with
// a top-level lm_head (>= 4.52). The vision tower and projector are vision/'s VisionEncoder; the
// image embeddings reach this model through ForwardBatch::embeds.
#include "deepinfer/model/architectures.h"
#include "deepinfer/model/format/safetensors.h"

namespace deepinfer::model {

Result<std::unique_ptr<Model>> load_llava(const ModelConfig& config, const WeightSource& source) {
  if (!source.safetensors)
    return unsupported("{}: LLaVA models load from a Hugging Face directory (safetensors), not GGUF",
                       source.description);
  WeightSource lm = source;
  lm.safetensors = source.safetensors->with_prefixes_renamed({
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"model.language_model.", "model."},
      {"lm_head.", "lm_head."},
  });
  return load_llama(config, lm);
}

}  // namespace deepinfer::model
