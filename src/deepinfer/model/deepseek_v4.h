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
#include "deepinfer/model/mtp_head.h"
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::model {

// Working buffers of DeepseekV4::mtp_forward, apart from the main forward's (its input may be
// final_streams(), which the main forward owns).
struct V4MtpScratch {
  std::vector<float> x, e, normed, collapsed, out, rows;
  V4HcScratch hc;
  V4AttnScratch attn;
  V4MoeScratch moe;
};

// Wall time of forward() by part since load (a few clock reads per layer), for benchmarks.
struct V4ForwardTimes {
  double attention = 0;  // attn_norm, q/kv projections, state writes, attention, output proj.
  double compress = 0;   // the CSA/HCA compressors and the indexer's scoring and top-k
  double moe = 0;        // ffn_norm, routing, routed and shared experts
  double mhc = 0;        // hyper-connection pre (mix, Sinkhorn, collapse) and post
  double head = 0;       // hc_head, final norm, head
  double total = 0;      // whole forward() calls (the rest: checks, embedding)
};

class DeepseekV4 final : public Model, public MtpHead {
 public:
  static Result<std::unique_ptr<DeepseekV4>> load(const ModelConfig& config,
                                                  const WeightSource& source);

  const ModelConfig& config() const override { return config_; }
  const DeepseekV4Config& v4_config() const { return v4_; }
  const V4Weights& weights() const { return w_; }
  // Hybrid state (deepseek_v4_state.h): recent rows per token, compressed entries per block.
  KvCacheSpec kv_cache_spec() const override;
  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx,
                 float* logits) override;
  std::vector<std::vector<uint64_t>> expert_token_counts() const override;
  std::vector<std::pair<std::string, double>> forward_part_seconds() const override {
    return {{"attention", times_.attention - times_.compress},
            {"compressor_indexer", times_.compress},
            {"moe", times_.moe},
            {"mhc", times_.mhc},
            {"head", times_.head},
            {"total", times_.total}};
  }

  // The hyper-connection streams [T, hc, hidden] of the last forward()'s T tokens after its last
  // layer (before the head): the MTP block's prev_streams.
  const std::vector<float>& final_streams() const { return x_; }

  // Expert parallelism (deepseek_v4_ep.cc, docs/parallel.md): the decoder layers' routed experts
  // run on the ranks of `ep` per its placement (row l = layer l; the MTP block's MoE stays
  // local); this rank holds only its placement's experts, and a live rebalance stages the ones a
  // new placement gives it. nullptr turns it off (every expert held again).
  bool supports_expert_parallel() const override { return true; }
  Status set_expert_parallel(parallel::EpGroup* ep, const ForwardContext& ctx) override;

  // MTP draft head (deepseek_v4_mtp.cc; DeepSeek's mtp.0, loaded when present): logits for token
  // t+2 from the main model's streams at t and token t+1. `batch` holds tokens t+1 at positions
  // t, with slots in `mtp_cache` (a KvCache of mtp_kv_cache_spec(): the MTP block's own
  // window state, apart from the main model's); prev_streams is [batch tokens, hc, hidden];
  // logits [batch.logits_rows.size(), vocab] as forward()'s.
  // hidden_out (when set) gets the MTP block's output streams [batch tokens, hc, hidden] (before
  // its head), which a chained MTP step takes as prev_streams.
  bool has_mtp() const override { return !w_.mtp.empty(); }
  KvCacheSpec mtp_kv_cache_spec() const override;
  Status mtp_forward(const ForwardBatch& batch, const float* prev_streams, KvCache& mtp_cache,
                     ForwardContext& ctx, float* logits, float* hidden_out) override;
  // MtpHead (mtp_head.h): a "hidden row" is a token's hc streams; forward() always keeps them.
  int64_t mtp_hidden_size() const override { return int64_t{v4_.hc_mult} * v4_.hidden; }
  void set_keep_final_hidden(bool on) override { (void)on; }
  const std::vector<float>& final_hidden() const override { return x_; }

 private:
  DeepseekV4(ModelConfig config, DeepseekV4Config v4);
  Status check_batch(const ForwardBatch& batch, const KvCache& cache) const;
  void layer_forward(int l, const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx);
  Result<parallel::StagedExperts> stage_experts(const parallel::EpPlacement& p, int rank);

  ModelConfig config_;
  DeepseekV4Config v4_;
  V4Weights w_;
  KvCacheSpec spec_;  // v4_kv_cache_spec(v4_), built once (check_batch reads it every step)
  V4HcDims hc_;
  V4MoeDims moe_;
  std::vector<std::vector<uint64_t>> counts_;  // [layer][expert]
  // Activations, reused: streams x_ [T, hc, hidden], sublayer input/output [T, hidden].
  std::vector<float> x_, collapsed_, normed_, out_, rows_;
  V4HcScratch hc_scratch_;
  V4AttnScratch attn_scratch_;
  V4MoeScratch moe_scratch_;
  // MTP: v4_ with the MTP block appended as layer num_layers (kV4MtpLayer), so the attention
  // block runs it as any window layer.
  DeepseekV4Config mtp_cfg_;
  V4MtpScratch mtp_scratch_;
  V4ForwardTimes times_;  // compress: from attn_scratch_.compress_seconds
  // Expert parallelism: the group (null: off), the context and scratch this rank's experts run
  // with for the other ranks' rows, and every layer's routed expert views as loaded.
  struct V4LayerExperts {
    std::vector<MlpWeights> bf16 = {};
    std::vector<V4Fp4Mlp> fp4 = {};
  };
  parallel::EpGroup* ep_ = nullptr;
  ForwardContext ep_ctx_ = {};
  V4MoeScratch ep_scratch_ = {};
  std::vector<V4LayerExperts> all_experts_ = {};
};

}  // namespace deepinfer::model
