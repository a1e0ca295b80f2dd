// DeepSeek-V4.1-Flash loader (model_type deepseek_v41). What is built: the config and its layer
// roles (deepseek_v41_config), the Engram hash layout (deepseek_v41_engram_hash) and the weights
// (deepseek_v41_weights); the forward pass is not, so a checkpoint is checked that far and then
// refused in one line rather than loaded half-built (docs/models.md, "DeepSeek-V4.1").
#include <string>
#include <utility>

#include "deepinfer/model/architectures.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_engram_hash.h"
#include "deepinfer/model/deepseek_v41_weights.h"

namespace deepinfer::model {

Result<std::unique_ptr<Model>> load_deepseek_v41(const ModelConfig& /*config*/,
                                                 const WeightSource& source) {
  const std::string& dir = source.description;
  // Every refusal names the model kind, whatever part of the checkpoint it is about.
  auto named = [](const Status& s) {
    return Status(s.code(), "DeepSeek-V4.1 (model_type deepseek_v41): " + s.message());
  };
  Result<DeepseekV41Config> parsed = deepseek_v41_config_from_json(dir + "/config.json");
  if (!parsed.is_ok()) return named(parsed.status());
  const DeepseekV41Config& v41 = *parsed;
  EngramHashLayout layout;
  if (!v41.engram.layers.empty()) {
    Result<EngramHashLayout> read = engram_hash_layout(v41, dir + "/engram_hash.json");
    if (!read.is_ok()) return named(read.status());
    layout = std::move(*read);
  }
  Result<V41Weights> weights = load_deepseek_v41_weights(v41, layout, source);
  if (!weights.is_ok()) return named(weights.status());
  return unsupported(
      "{}: DeepSeek-V4.1 (deepseek_v41) is not built yet: its config ({} layers, KV sources {}, "
      "index sources {}), Engram hashing and weights are read, the forward pass is not (issue 22)",
      dir, v41.num_layers, v41.kv_sources.size(), v41.index_sources.size());
}

}  // namespace deepinfer::model
