// The architecture-independent half of an expert-parallel MoE layer (moe_ep.cc), shared by
// DeepSeek-V3 (moe.h) and DeepSeek-V4 (deepseek_v4_moe.h): once a layer has routed its tokens,
// each (token, choice) row goes to the rank holding the chosen replica, and the outputs are
// combined in the order the single-process layers add them; on the receiving side, the rows of
// one logical expert run as one matmul.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "deepinfer/model/layers/swiglu_mlp.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::parallel {
class EpGroup;
struct EpPlacement;
}  // namespace deepinfer::parallel

namespace deepinfer::model {

// Routed part of MoE layer `layer` (the placement's row) for x [T, hidden]: row t * K + k is
// token t's k-th choice idx[t * K + k] with weight w[t * K + k]; it goes to the replica the
// placement picks for key t. out [T, hidden] = per token, from zero, the weighted outputs added in
// ascending expert id (a repeated id, as a hash table may give, in k order). xs / ys: buffers.
void ep_dispatch_combine(parallel::EpGroup& ep, int layer, const int32_t* idx, const float* w,
                         const float* x, int64_t T, int K, int64_t hidden, float* out,
                         std::vector<float>& xs, std::vector<float>& ys);

// Runs logical expert `expert` over rows x [rows, hidden] into y [rows, hidden].
using ExpertRun = std::function<void(int expert, const float* x, int64_t rows, float* y)>;
// This rank's part: rows x [n, hidden] for physical slots slots[n] of `layer` into y, grouped by
// logical expert (replicas of one expert on this rank run as one call of `run`).
void ep_run_local_experts(const parallel::EpPlacement& p, int layer, const int32_t* slots,
                          const float* x, int64_t n, int64_t hidden, float* y,
                          const ExpertRun& run);

// Reads one byte per page of t, so that a staged expert's weights are in memory before its
// first step.
void fault_in(const Tensor& t);
void fault_in(const MlpWeights& m);

}  // namespace deepinfer::model
