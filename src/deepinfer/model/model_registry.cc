// Architecture name -> loader. A new architecture is one file plus one line here.
#include <string_view>

#include "deepinfer/model/architectures.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {
namespace {

struct Architecture {
  std::string_view name;
  Result<std::unique_ptr<Model>> (*load)(const ModelConfig&, const WeightSource&);
};

constexpr Architecture kArchitectures[] = {
    {"llama", load_llama},
    {"deepseek_v3", load_deepseek_v3},
    {"deepseek_v4", load_deepseek_v4},
    {"deepseek_v41", load_deepseek_v41},
    {"llava", load_llava},
};

}  // namespace

Result<std::unique_ptr<Model>> load_model(const WeightSource& source) {
  Result<ModelConfig> config = source.gguf ? config_from_gguf(*source.gguf)
                                           : config_from_hf_json(source.description + "/config.json");
  if (!config.is_ok()) return config.status();
  for (const Architecture& arch : kArchitectures) {
    if (arch.name == config->architecture) return arch.load(*config, source);
  }
  std::string known;
  for (const Architecture& arch : kArchitectures) known += (known.empty() ? "" : ", ") + std::string(arch.name);
  return unsupported("{}: unknown architecture '{}' (supported: {})", source.description,
                     config->architecture, known);
}

}  // namespace deepinfer::model
