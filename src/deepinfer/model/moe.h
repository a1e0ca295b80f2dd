// DeepSeekMoE on the CPU: sigmoid router with a selection-only bias and group-limited top-k
// (DeepSeek-V3's "noaux_tc"), routed experts run grouped (each expert's tokens gathered into one
// matmul), weighted combine, plus the always-on shared experts. Counts tokens per expert.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v3_weights.h"
#include "deepinfer/model/layers/swiglu_mlp.h"
#include "deepinfer/model/model.h"

namespace deepinfer::parallel {
class EpGroup;
struct EpPlacement;
}  // namespace deepinfer::parallel

namespace deepinfer::model {

struct MoeRouting {
  int n_experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
};

struct MoeWeights {
  Tensor router;       // f32 [n_experts, hidden]
  Tensor score_bias;   // f32 [n_experts] (e_score_correction_bias); empty = zeros
  std::vector<MlpWeights> experts;
  MlpWeights shared;   // n_shared_experts fused into one MLP; gate.weight empty when absent
};

// Tokens routed to each expert, per MoE layer, since the last reset. Cheap to keep on: one
// increment per (token, chosen expert).
class ExpertStats {
 public:
  void init(int num_layers, int num_experts);
  uint64_t count(int layer, int expert) const { return counts_[size_t(layer) * num_experts_ + expert]; }
  uint64_t* layer_counts(int layer) { return counts_.data() + size_t(layer) * num_experts_; }
  int num_layers() const { return num_layers_; }
  int num_experts() const { return num_experts_; }
  void reset();

 private:
  int num_layers_ = 0;
  int num_experts_ = 0;
  std::vector<uint64_t> counts_;  // [num_layers * num_experts]
};

// Router: from logits [T, n_experts] to the chosen experts idx [T, top_k] and their weights
// w [T, top_k]: scores = sigmoid(logits); choice scores = scores + bias; keep the topk_group
// groups with the largest sum of their top-2 choice scores; take the top_k choice scores among
// them; weights are the plain scores, normalized to sum 1 when norm_topk_prob, times the
// routed scaling factor.
void moe_route(const MoeRouting& r, const float* logits, const float* bias, int64_t T, int32_t* idx, float* w);

struct MoeScratch {
  std::vector<float> logits, weights, xs, gate, up, ys;
  std::vector<int32_t> idx;
  std::vector<MoeScratch> per_thread;  // gate/up buffers when experts run one per thread
};

// One SwiGLU MLP (swiglu_mlp_forward) over `rows` rows of x [rows, hidden] into out [rows, hidden],
// its activations in s.gate / s.up.
void mlp_forward(const MlpWeights& m, const float* x, int64_t rows, int64_t hidden, float* out, MoeScratch& s,
                 ForwardContext& ctx);
// out = routed experts + shared experts, for x [T, hidden]. Adds each token's choices into
// `counts` [n_experts] when it is not null.
void moe_forward(const MoeWeights& m, const MoeRouting& r, const float* x, int64_t T, int64_t hidden, float* out,
                 uint64_t* counts, MoeScratch& s, ForwardContext& ctx);

// Expert parallel (moe_ep.cc): the same, with the routed experts run on the ranks of `ep` that
// hold them (layer = the model layer, for the placement). Each token's expert outputs are summed
// in the order moe_forward sums them, so results are bitwise equal in batch-invariant mode.
void moe_forward_ep(const MoeWeights& m, const MoeRouting& r, int layer, parallel::EpGroup& ep, const float* x,
                    int64_t T, int64_t hidden, float* out, uint64_t* counts, MoeScratch& s, ForwardContext& ctx);
// This rank's part of an expert-parallel layer: rows x [n, hidden] for physical slots slots[n]
// (owned here) through their experts into y [n, hidden].
void moe_local_experts(const MoeWeights& m, const parallel::EpPlacement& p, int layer, const int32_t* slots,
                       const float* x, int64_t n, int64_t hidden, float* y, MoeScratch& s, ForwardContext& ctx);

// Skews routing on purpose, for load-balancing experiments: adds -alpha * ln(1 + rank(e)) to the
// layer's selection bias, rank being a fixed pseudo-random permutation of the experts per layer
// (so each layer has its own popular experts, Zipf-like). Changes only which experts are picked,
// never their weights. alpha 0 leaves the layer as it is.
void skew_router(MoeWeights& m, int n_experts, int layer, float alpha);

Result<MlpWeights> load_mlp(const DeepseekWeights& w, const std::string& prefix, int64_t hidden,
                            int64_t intermediate);
Result<MoeWeights> load_moe(const DeepseekWeights& w, const std::string& prefix, const MoeRouting& r,
                            int64_t hidden, int64_t moe_intermediate, int n_shared);

}  // namespace deepinfer::model
