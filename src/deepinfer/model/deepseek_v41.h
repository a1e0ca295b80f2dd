// The DeepSeek-V4.1 architecture (the V4.1-Flash layout, model_type deepseek_v41) from a Hugging
// Face safetensors directory: Engram at its layers, the mHC streams collapsed with the previous
// site's pre, the V4.1 attention (window on every layer, shared compressed entries of the KV
// sources, reused top-k, candidate blocks) with its state in the engine's paged cache
// (deepseek_v41_state.h), V4's MoE with gate_temp, and the head on the last FFN site's pre.
// Matched to tests/reference/deepseek_v41_reference.py. Not loaded: the DSpark draft, vision.
#pragma once

#include <memory>
#include <vector>

#include "deepinfer/model/deepseek_v41_attention.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_engram_hash.h"
#include "deepinfer/model/deepseek_v41_mhc.h"
#include "deepinfer/model/deepseek_v41_weights.h"
#include "deepinfer/model/deepseek_v4_moe.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {

class DeepseekV41 final : public Model {
 public:
  static Result<std::unique_ptr<DeepseekV41>> load(const ModelConfig& config,
                                                   const WeightSource& source);

  const ModelConfig& config() const override { return config_; }
  const DeepseekV41Config& v41_config() const { return v41_; }
  // Hybrid state (deepseek_v41_state.h), and token_history = engram_max_ngram_size - 1 when
  // there is Engram (its n-grams reach back before a step's first token).
  KvCacheSpec kv_cache_spec() const override { return spec_; }
  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx,
                 float* logits) override;
  std::vector<std::vector<uint64_t>> expert_token_counts() const override { return counts_; }
  // Decoder-side saving: the first tail layer (v41_first_tail_layer; num_layers: none), and the
  // layer-token work of every forward so far (sum over layers of the tokens each ran over).
  int first_tail_layer() const { return first_tail_; }
  int64_t layer_tokens() const { return layer_tokens_; }

 private:
  DeepseekV41(ModelConfig config, DeepseekV41Config v41, EngramHashLayout layout, V41Weights w);
  Status check_batch(const ForwardBatch& b, const KvCache& cache) const;
  // rows_ [engram layers][T * n_cols]: each new token's Engram table rows.
  void engram_rows(const ForwardBatch& b);
  void layer_forward(int l, const ForwardBatch& b, KvCache& cache, ForwardContext& ctx);
  // Decoder-side saving: tail_ = the batch's tokens the tail layers run over (ForwardBatch::
  // seq_tail_from), their window cut at seq_tail_from; the activations, picks and Engram rows
  // compacted to them (keep_: which rows of the batch).
  void keep_tail_tokens(const ForwardBatch& b);
  // The logits of b's logits rows from the streams x_ and pres pre_ (rows of b).
  Status head(const ForwardBatch& b, float* logits, ForwardContext& ctx);

  ModelConfig config_;
  DeepseekV41Config v41_;
  EngramHashLayout layout_;
  V41Weights w_;
  KvCacheSpec spec_;
  V4HcDims hc_;
  V4MoeDims moe_;
  std::vector<V41HcSite> attn_sites_, ffn_sites_;  // [layer] views of w_'s mHC and norms
  std::vector<std::vector<uint64_t>> counts_;      // [layer][expert]
  // Activations, reused: streams x_ [T, hc, hidden], the previous site's pre pre_ [T, hc] (and
  // the attention site's, site_pre_), sublayer input/output [T, hidden], Engram rows.
  std::vector<float> x_, pre_, site_pre_, normed_, out_, rows_x_, rows_pre_;
  std::vector<std::vector<int64_t>> rows_;
  V4HcScratch hc_scratch_;
  V41AttnScratch attn_scratch_;
  V41Picks picks_;
  V4MoeScratch moe_scratch_;
  int first_tail_ = 0;
  int64_t layer_tokens_ = 0;
  ForwardBatch tail_;
  std::vector<int64_t> keep_;  // rows of the batch kept in tail_, ascending
};

}  // namespace deepinfer::model
