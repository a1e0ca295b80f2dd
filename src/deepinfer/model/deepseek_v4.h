// The DeepSeek-V4 architecture (the V4-Flash layout) from a Hugging Face safetensors directory:
// hyper-connection streams around every sublayer, window/CSA/HCA attention with its state in
// the engine's paged cache (deepseek_v4_state.h), hash-routed and top-k MoE, and the
// hyper-connection head. Matched to transformers' DeepseekV4ForCausalLM.
#pragma once

#include <memory>
#include <vector>

#include "deepinfer/model/deepseek_v4_attention.h"
#include "deepinfer/model/deepseek_v4_config.h"
#include "deepinfer/model/deepseek_v4_mhc.h"
#include "deepinfer/model/deepseek_v4_moe.h"
#include "deepinfer/model/deepseek_v4_weights.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {

class DeepseekV4 final : public Model {
 public:
  static Result<std::unique_ptr<DeepseekV4>> load(const ModelConfig& config,
                                                  const WeightSource& source);

  const ModelConfig& config() const override { return config_; }
  const DeepseekV4Config& v4_config() const { return v4_; }
  const V4Weights& weights() const { return w_; }
  // One "KV head" per layer holding a state row of v4_row_floats() floats; no V pool.
  KvCacheSpec kv_cache_spec() const override;
  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx,
                 float* logits) override;
  std::vector<std::vector<uint64_t>> expert_token_counts() const override;

 private:
  DeepseekV4(ModelConfig config, DeepseekV4Config v4);
  Status check_batch(const ForwardBatch& batch, const KvCache& cache) const;
  void layer_forward(int l, const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx);

  ModelConfig config_;
  DeepseekV4Config v4_;
  V4Weights w_;
  V4HcDims hc_;
  V4MoeDims moe_;
  std::vector<std::vector<uint64_t>> counts_;  // [layer][expert]
  // Activations, reused: streams x_ [T, hc, hidden], sublayer input/output [T, hidden].
  std::vector<float> x_, collapsed_, normed_, out_, rows_;
  V4HcScratch hc_scratch_;
  V4AttnScratch attn_scratch_;
  V4MoeScratch moe_scratch_;
};

}  // namespace deepinfer::model
