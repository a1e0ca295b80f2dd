// The interface every architecture implements and the registry entry point that maps an
// architecture name to its loader (one line per architecture in model_registry.cc). The KV cache
// storage a model writes into is in kv_cache.h (included here for the engine and the models).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/forward_batch.h"
#include "deepinfer/model/kv_cache.h"
#include "deepinfer/model/model_config.h"

namespace deepinfer::format {
class GgufFile;
class SafetensorsModel;
}  // namespace deepinfer::format

namespace deepinfer::parallel {
class EpGroup;
}  // namespace deepinfer::parallel

namespace deepinfer::model {

struct ForwardContext {
  ThreadPool* pool = nullptr;
  bool batch_invariant = false;
  // Quantized weights: float32 activations (matches the float reference to ~1e-4), or 8-bit
  // activations with integer dot products (llama.cpp's arithmetic: faster, logits move ~1).
  bool int8_activations = false;
  // Layer-by-layer KV export (prefill/decode disaggregation): called after layer l of the batch
  // wrote its K/V, so those rows can leave while later layers run. Null: nothing to call.
  // Architectures whose cache is one [K, V] slice per layer call it; others may ignore it.
  std::function<void(int layer)> after_layer = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvCacheSpec kv_cache_spec() const = 0;
  // Runs the batch, writes its new K/V into `cache`, and fills `logits`
  // [batch.logits_rows.size(), vocab_size].
  virtual Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx,
                         float* logits) = 0;
  // MoE models: tokens routed to each expert since load, [layer][expert] (dense layers count
  // nothing). Counted during forward, so always on; it feeds expert load balancing. Empty for
  // dense models.
  virtual std::vector<std::vector<uint64_t>> expert_token_counts() const { return {}; }
  // Wall seconds spent in forward() since load, by part ("attention", "moe", ...; a "total"
  // entry for whole forward() calls), for `deepinfer bench`. Empty when the model keeps none.
  virtual std::vector<std::pair<std::string, double>> forward_part_seconds() const { return {}; }
  // Expert parallelism across processes (docs/parallel.md): whether this model's MoE layers can
  // run their routed experts on the ranks of an EpGroup, and turning it on (nullptr: off, every
  // expert held here again). `ctx` runs this rank's experts for the other ranks' rows.
  virtual bool supports_expert_parallel() const { return false; }
  virtual Status set_expert_parallel(parallel::EpGroup* /*ep*/, const ForwardContext& /*ctx*/) {
    return unsupported("{}: no expert-parallel MoE layers", config().architecture);
  }
};

// Where a model's weights come from: exactly one of the two is set.
struct WeightSource {
  std::shared_ptr<const format::GgufFile> gguf;
  std::shared_ptr<const format::SafetensorsModel> safetensors;
  std::string description;  // file or directory, for error messages
};

using ModelLoader = std::function<Result<std::unique_ptr<Model>>(const ModelConfig&, const WeightSource&)>;

// Reads the config, finds the architecture in the registry and loads it. Unknown
// architectures get an error naming the file and the architecture.
Result<std::unique_ptr<Model>> load_model(const WeightSource& source);

}  // namespace deepinfer::model
