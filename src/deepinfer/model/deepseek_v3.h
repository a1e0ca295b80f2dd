// The DeepSeek-V3 architecture (V3, R1, V3.1, Kimi K2, Moonlight) from Hugging Face safetensors:
// MLA attention with a latent-only paged KV cache, dense MLP for the first layers and
// DeepSeekMoE after, final norm and head, and the MTP module as a next-next-token draft head.
#pragma once

#include <memory>
#include <vector>

#include "deepinfer/model/mla_attention.h"
#include "deepinfer/model/model.h"
#include "deepinfer/model/moe.h"
#include "deepinfer/model/mtp_head.h"

namespace deepinfer::parallel {
class EpGroup;
struct EpPlacement;
struct StagedExperts;
}  // namespace deepinfer::parallel

namespace deepinfer::model {

struct DeepseekLayer {
  Tensor attn_norm, ffn_norm;  // f32 [hidden]
  MlaWeights attn;
  bool is_moe = false;
  MlpWeights mlp;              // dense layers
  MoeWeights moe;              // MoE layers
};

// Wall time of forward() by component since the last reset (a few clock reads per layer), for
// benchmarks: how the step splits between attention and MoE.
struct DeepseekForwardTimes {
  double attention = 0;  // MLA incl. its projections and the KV write
  double moe = 0;        // routing + routed and shared experts
  double dense_mlp = 0;  // the first_k_dense_replace layers' MLP
  double total = 0;      // whole forward() calls (the rest: embedding, norms, head)
  int64_t forwards = 0;
};

class DeepseekV3 final : public Model, public MtpHead {
 public:
  static Result<std::unique_ptr<DeepseekV3>> load(const ModelConfig& config, const WeightSource& source);

  const ModelConfig& config() const override { return config_; }
  // One "KV head" per layer holding [latent (kv_lora_rank) | k_pe (qk_rope_head_dim)]; no V pool.
  KvCacheSpec kv_cache_spec() const override;
  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx, float* logits) override;

  // Attention form (tests compare the absorbed and the expanded forms).
  void set_mla_mode(MlaMode mode) { mla_mode_ = mode; }
  // Tokens routed to each expert, per layer (rows of dense layers stay zero; the MTP layer, if
  // any, is row num_layers).
  const ExpertStats& expert_stats() const { return expert_stats_; }
  std::vector<std::vector<uint64_t>> expert_token_counts() const override;
  void reset_expert_stats() { expert_stats_.reset(); }
  // Expert parallelism across processes (docs/parallel.md): routed experts run on the ranks of
  // `ep` per its placement; `ctx` runs this rank's experts for the others while it has no batch
  // of its own. nullptr turns it off.
  // The rank keeps only the experts its placement gives it (deepseek_v3_ep.cc) and installs a
  // stager with which a live rebalance reads the experts a new placement gives it from the
  // checkpoint. nullptr turns it off (every expert is held again).
  bool supports_expert_parallel() const override { return true; }
  Status set_expert_parallel(parallel::EpGroup* ep, const ForwardContext& ctx) override;
  const DeepseekForwardTimes& forward_times() const { return times_; }
  void reset_forward_times() { times_ = {}; }
  std::vector<std::pair<std::string, double>> forward_part_seconds() const override {
    return {{"attention", times_.attention}, {"moe", times_.moe}, {"dense_mlp", times_.dense_mlp},
            {"total", times_.total}};
  }
  // MtpHead (mtp_head.h). The kept hidden state is after the final norm; MTP
  // (num_nextn_predict_layers = 1) runs the module model.layers.{num_layers}.
  void set_keep_final_hidden(bool on) override { keep_hidden_ = on; }
  const std::vector<float>& final_hidden() const override { return final_hidden_; }
  bool has_mtp() const override { return has_mtp_; }
  int64_t mtp_hidden_size() const override { return config_.hidden_size; }
  KvCacheSpec mtp_kv_cache_spec() const override;
  Status mtp_forward(const ForwardBatch& batch, const float* prev_hidden, KvCache& mtp_cache, ForwardContext& ctx,
                     float* logits, float* hidden_out) override;

 private:
  DeepseekV3(ModelConfig config, kernels::RopeScaling rope_scaling);
  Status load_weights(const WeightSource& source);
  Result<DeepseekLayer> load_layer(const DeepseekWeights& w, int index) const;
  // Expert parallelism (deepseek_v3_ep.cc): the MoE layer of placement row `row` (the MTP layer
  // is row num_layers); the experts `p` gives `rank` that this model lacks, read from source_.
  DeepseekLayer& layer_at_row(int row) { return row < config_.num_layers ? layers_[size_t(row)] : mtp_layer_; }
  Result<parallel::StagedExperts> stage_experts(const parallel::EpPlacement& p, int rank);
  Status check_batch(const ForwardBatch& batch, const KvCache& cache, int layers) const;
  void layer_forward(const DeepseekLayer& layer, int stats_row, const ForwardBatch& batch,
                     const MlaCache& kv_cache, ForwardContext& ctx);
  void head(const ForwardBatch& batch, const Tensor& norm, const LinearWeight& out, ForwardContext& ctx,
            float* logits);

  ModelConfig config_;
  MlaDims mla_;
  MoeRouting routing_;
  MlaMode mla_mode_ = MlaMode::kAuto;
  Tensor embedding_, output_norm_;
  LinearWeight output_;
  std::vector<DeepseekLayer> layers_;
  ExpertStats expert_stats_;
  WeightSource source_;
  parallel::EpGroup* ep_ = nullptr;  // expert parallel when set (not owned)
  ForwardContext ep_ctx_;            // for experts run on behalf of other ranks
  MoeScratch ep_scratch_;
  DeepseekForwardTimes times_;
  bool keep_hidden_ = false;
  std::vector<float> final_hidden_;
  // MTP module.
  bool has_mtp_ = false;
  Tensor mtp_embedding_, mtp_enorm_, mtp_hnorm_, mtp_head_norm_;
  LinearWeight mtp_eh_proj_, mtp_head_;
  DeepseekLayer mtp_layer_;
  // Activations, grown and reused.
  std::vector<float> x_, h_, tmp_, rows_;
  MlaScratch mla_scratch_;
  MoeScratch moe_scratch_;
};

}  // namespace deepinfer::model
