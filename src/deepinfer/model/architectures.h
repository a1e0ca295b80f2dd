// Loaders of the architectures we implement, one per file in model/. The registry table in
// model_registry.cc maps architecture names to them.
#pragma once

#include <memory>

#include "deepinfer/base/status.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {

Result<std::unique_ptr<Model>> load_llama(const ModelConfig& config, const WeightSource& source);
Result<std::unique_ptr<Model>> load_deepseek_v3(const ModelConfig& config, const WeightSource& source);
Result<std::unique_ptr<Model>> load_deepseek_v4(const ModelConfig& config, const WeightSource& source);
// Checks a DeepSeek-V4.1 checkpoint's config and Engram layout, then refuses it: not built yet.
Result<std::unique_ptr<Model>> load_deepseek_v41(const ModelConfig& config, const WeightSource& source);
Result<std::unique_ptr<Model>> load_llava(const ModelConfig& config, const WeightSource& source);

}  // namespace deepinfer::model
