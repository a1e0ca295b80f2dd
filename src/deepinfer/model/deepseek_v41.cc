// DeepSeek-V4.1-Flash loader (model_type deepseek_v41). What is built: the config and its layer
// roles (deepseek_v41_config), the Engram hash layout (deepseek_v41_engram_hash) and the FP8 32x32
// block matmul; the forward pass is not, so a checkpoint is checked that far and then refused in
// one line rather than loaded half-built (docs/models.md, "DeepSeek-V4.1").
#include <string>

#include "deepinfer/model/architectures.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_engram_hash.h"

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
  if (!v41.engram.layers.empty()) {
    Result<EngramHashLayout> layout = engram_hash_layout(v41, dir + "/engram_hash.json");
    if (!layout.is_ok()) return named(layout.status());
  }
  return unsupported(
      "{}: DeepSeek-V4.1 (deepseek_v41) is not built yet: its config ({} layers, KV sources {}, "
      "index sources {}) and Engram hashing are read, the forward pass is not (issue 22)",
      dir, v41.num_layers, v41.kv_sources.size(), v41.index_sources.size());
}

}  // namespace deepinfer::model
