// DeepSeek-V3 under expert parallelism (docs/parallel.md): the hooks the rank group calls (this
// rank's experts for the others' rows) and the expert weights a rank holds. A rank keeps only the
// experts its placement gives it; a live rebalance stages the experts a new placement adds by
// reading them from the checkpoint (each rank has it; its pages are faulted in here, off the
// step path) and installs them, dropping the ones it no longer holds, between two steps.
#include <memory>
#include <set>
#include <tuple>

#include "deepinfer/base/check.h"
#include "deepinfer/model/deepseek_v3.h"
#include "deepinfer/model/moe_ep.h"
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::model {
Result<parallel::StagedExperts> DeepseekV3::stage_experts(const parallel::EpPlacement& p,
                                                          int rank) {
  const ModelConfig& c = config_;
  const int rows = c.num_layers + (has_mtp_ ? 1 : 0);
  if (p.num_experts != c.n_routed_experts || p.num_layers < rows || rank < 0 || rank >= p.ranks)
    return invalid_argument(
        "expert placement ({} experts, {} layers) does not fit the model ({} experts, {} layers)",
        p.num_experts, p.num_layers, c.n_routed_experts, rows);
  DeepseekWeights w(source_);
  using Load = std::tuple<int, int, MlpWeights>;  // placement row, expert, weights
  auto loads = std::make_shared<std::vector<Load>>();
  auto keep = std::make_shared<std::vector<std::set<int>>>(size_t(rows));
  parallel::StagedExperts out;
  for (int row = 0; row < rows; ++row) {
    const DeepseekLayer& L = layer_at_row(row);
    if (!L.is_moe) continue;
    const std::vector<int> mine = parallel::experts_on_rank(p, row, rank);
    (*keep)[size_t(row)] = {mine.begin(), mine.end()};
    for (int e : mine) {
      if (!L.moe.experts[size_t(e)].gate.weight.empty()) continue;  // held already
      const std::string prefix =
          "model.layers." + std::to_string(row) + ".mlp.experts." + std::to_string(e);
      DI_ASSIGN_OR_RETURN(MlpWeights m,
                          load_mlp(w, prefix, c.hidden_size, c.moe_intermediate_size));
      fault_in(m);
      loads->emplace_back(row, e, std::move(m));
    }
    for (int e = 0; e < c.n_routed_experts; ++e)
      out.dropped +=
          !L.moe.experts[size_t(e)].gate.weight.empty() && !(*keep)[size_t(row)].count(e);
  }
  out.loaded = int(loads->size());
  out.install = [this, loads, keep] {
    for (auto& [row, e, m] : *loads) layer_at_row(row).moe.experts[size_t(e)] = std::move(m);
    for (size_t row = 0; row < keep->size(); ++row) {
      DeepseekLayer& L = layer_at_row(int(row));
      if (!L.is_moe) continue;
      for (size_t e = 0; e < L.moe.experts.size(); ++e)
        if (!(*keep)[row].count(int(e))) L.moe.experts[e] = MlpWeights{};
    }
  };
  return out;
}

Status DeepseekV3::set_expert_parallel(parallel::EpGroup* ep, const ForwardContext& ctx) {
  if (config_.n_routed_experts <= 0)
    return unsupported("this deepseek_v3 checkpoint has no routed experts");
  if (!ep) {  // every expert again
    if (ep_) {
      DI_ASSIGN_OR_RETURN(
          parallel::EpPlacement all,
          parallel::contiguous_placement(ep_->placement().num_layers, config_.n_routed_experts, 1));
      DI_ASSIGN_OR_RETURN(parallel::StagedExperts s, stage_experts(all, 0));
      s.install();
    }
    ep_ = nullptr;
    return Status::ok();
  }
  const parallel::EpPlacement& p = ep->placement();
  if (p.num_experts != config_.n_routed_experts ||
      p.num_layers < config_.num_layers + (has_mtp_ ? 1 : 0))
    return invalid_argument(
        "expert placement ({} experts, {} layers) does not fit the model ({} experts, {} layers)",
        p.num_experts, p.num_layers, config_.n_routed_experts, config_.num_layers);
  DI_ASSIGN_OR_RETURN(parallel::StagedExperts mine, stage_experts(p, ep->rank()));
  mine.install();
  ep_ = ep;
  ep_ctx_ = ctx;
  ep->set_local_experts(
      [this](int layer, const int32_t* slots, const float* x, int64_t n, float* y) {
        const DeepseekLayer& L = layer_at_row(layer);
        DI_CHECK(L.is_moe, "expert parallel: layer {} has no experts", layer);
        moe_local_experts(L.moe, ep_->placement(), layer, slots, x, n, config_.hidden_size, y,
                          ep_scratch_, ep_ctx_);
      });
  ep->set_expert_stager(
      [this](const parallel::EpPlacement& next, int rank) { return stage_experts(next, rank); });
  return Status::ok();
}

}  // namespace deepinfer::model
