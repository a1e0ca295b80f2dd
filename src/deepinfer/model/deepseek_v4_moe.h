// DeepSeek-V4's MoE: scores s = sqrt(softplus(gate . x / gate_temp)) (gate_temp: V4.1's router
// temperature, 1 in V4); experts from the fixed tid2eid table (hash layers) or the top-k of s +
// selection bias; weights s[idx] / sum * routed_scaling; each expert and the shared expert a SwiGLU
// with gate clamped to <= limit and up to [-limit, limit]. Routed experts may be packed FP4
// (V4Moe::fp4_experts), run by kernels::fp4_matmul.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4_weights.h"

namespace deepinfer::parallel {
class EpGroup;
}  // namespace deepinfer::parallel

namespace deepinfer::model {

struct V4MoeDims {
  int n_experts = 0;
  int top_k = 0;
  float routed_scaling = 1.0f;
  float swiglu_limit = 0.0f;  // 0 = no clamp
  int64_t hidden = 0;
  float gate_temp = 1.0f;  // DeepSeek-V4.1: router logits / gate_temp before sqrt(softplus)
};

struct V4MoeScratch {
  std::vector<float> logits, weights, xs, ys, gate, up;
  std::vector<int32_t> idx;
};

// Routing of T tokens from router logits [T, E]: idx/w [T, top_k]. token_ids feed hash layers.
void v4_route(const V4MoeDims& d, const V4Moe& m, const float* logits, const int32_t* token_ids,
              int64_t T, int32_t* idx, float* w);
// Routed expert e (bf16/FP8 or FP4) over rows x [rows, hidden] into out [rows, hidden].
void v4_expert_forward(const V4MoeDims& d, const V4Moe& m, int e, const float* x, int64_t rows,
                       float* out, V4MoeScratch& s, ForwardContext& ctx);
// The shared expert over x [T, hidden] into out [T, hidden].
void v4_shared_forward(const V4MoeDims& d, const V4Moe& m, const float* x, int64_t T, float* out,
                       V4MoeScratch& s, ForwardContext& ctx);
// Whether routed expert e's weights are held here (under expert parallelism a rank holds only
// its placement's experts).
bool v4_expert_held(const V4Moe& m, int e);
// out [T, hidden] = routed + shared experts of x [T, hidden]; adds chosen experts to counts [E].
void v4_moe_forward(const V4MoeDims& d, const V4Moe& m, const float* x, const int32_t* token_ids,
                    int64_t T, float* out, uint64_t* counts, V4MoeScratch& s, ForwardContext& ctx);
// The same with the routed experts run on the ranks of `ep` that hold them (moe_ep.h; layer =
// the model layer, the placement's row): routing (hash layers included) and the shared expert
// here, the outputs added in v4_moe_forward's order, so bitwise equal in batch-invariant mode.
void v4_moe_forward_ep(const V4MoeDims& d, const V4Moe& m, int layer, parallel::EpGroup& ep,
                       const float* x, const int32_t* token_ids, int64_t T, float* out,
                       uint64_t* counts, V4MoeScratch& s, ForwardContext& ctx);

}  // namespace deepinfer::model
