// DeepSeek-V4 under expert parallelism (docs/parallel.md): the MoE layer with its routed experts
// on the ranks that hold them (the dispatch and combine shared with V3, moe_ep.h), the hooks the
// rank group calls, and the experts a rank holds. Hash layers route through tid2eid as always;
// only where the chosen experts run changes. The shared expert, attention and the MTP block (its
// MoE runs locally, all experts held) are replicated. V4's routed experts are views of the
// mapped checkpoint, so a rank keeps the full set of views aside (all_experts_) and holds in the
// layer only its placement's; staging a new placement takes the views it gains and faults their
// pages in, off the step path.
#include <algorithm>
#include <memory>
#include <set>
#include <tuple>

#include "deepinfer/base/check.h"
#include "deepinfer/model/deepseek_v4.h"
#include "deepinfer/model/moe_ep.h"
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::model {
namespace {

void fault_in(const V4Fp4Mlp& m) {
  for (const V4Fp4Linear* w : {&m.gate, &m.up, &m.down}) {
    model::fault_in(w->weight);
    model::fault_in(w->scale);
  }
}

}  // namespace

void v4_moe_forward_ep(const V4MoeDims& d, const V4Moe& m, int layer, parallel::EpGroup& ep,
                       const float* x, const int32_t* token_ids, int64_t T, float* out,
                       uint64_t* counts, V4MoeScratch& s, ForwardContext& ctx) {
  const int E = d.n_experts, K = d.top_k;
  const int64_t H = d.hidden;
  s.logits.resize(size_t(T * E));
  s.idx.resize(size_t(T * K));
  s.weights.resize(size_t(T * K));
  if (T > 0) {
    LinearWeight router;
    router.weight = m.gate;
    linear_forward(router, x, T, H, s.logits.data(), E, ctx);
    v4_route(d, m, s.logits.data(), token_ids, T, s.idx.data(), s.weights.data());
  }
  if (counts)
    for (int64_t i = 0; i < T * K; ++i) counts[s.idx[size_t(i)]] += 1;
  ep_dispatch_combine(ep, layer, s.idx.data(), s.weights.data(), x, T, K, H, out, s.xs, s.ys);
  if (T == 0) return;
  s.ys.resize(std::max(s.ys.size(), size_t(T * H)));
  v4_shared_forward(d, m, x, T, s.ys.data(), s, ctx);
  for (int64_t i = 0; i < T * H; ++i) out[i] += s.ys[size_t(i)];
}

Result<parallel::StagedExperts> DeepseekV4::stage_experts(const parallel::EpPlacement& p,
                                                          int rank) {
  const int rows = v4_.num_layers, E = v4_.n_experts;
  if (p.num_experts != E || p.num_layers < rows || rank < 0 || rank >= p.ranks)
    return invalid_argument(
        "expert placement ({} experts, {} layers) does not fit the model ({} experts, {} layers)",
        p.num_experts, p.num_layers, E, rows);
  using Load = std::tuple<int, int>;  // layer, expert
  auto loads = std::make_shared<std::vector<Load>>();
  auto keep = std::make_shared<std::vector<std::set<int>>>(size_t(rows));
  parallel::StagedExperts out;
  for (int l = 0; l < rows; ++l) {
    const V4Moe& moe = w_.layers[size_t(l)].moe;
    const std::vector<int> mine = parallel::experts_on_rank(p, l, rank);
    (*keep)[size_t(l)] = {mine.begin(), mine.end()};
    for (int e : mine) {
      if (v4_expert_held(moe, e)) continue;
      const V4LayerExperts& all = all_experts_[size_t(l)];
      if (all.fp4.empty())
        fault_in(all.bf16[size_t(e)]);
      else
        fault_in(all.fp4[size_t(e)]);
      loads->emplace_back(l, e);
    }
    for (int e = 0; e < E; ++e)
      out.dropped += v4_expert_held(moe, e) && !(*keep)[size_t(l)].count(e);
  }
  out.loaded = int(loads->size());
  out.install = [this, loads, keep] {
    for (auto [l, e] : *loads) {
      V4Moe& moe = w_.layers[size_t(l)].moe;
      const V4LayerExperts& all = all_experts_[size_t(l)];
      if (all.fp4.empty())
        moe.experts[size_t(e)] = all.bf16[size_t(e)];
      else
        moe.fp4_experts[size_t(e)] = all.fp4[size_t(e)];
    }
    for (size_t l = 0; l < keep->size(); ++l) {
      V4Moe& moe = w_.layers[l].moe;
      for (int e = 0; e < v4_.n_experts; ++e) {
        if ((*keep)[l].count(e)) continue;
        if (moe.fp4_experts.empty())
          moe.experts[size_t(e)] = MlpWeights{};
        else
          moe.fp4_experts[size_t(e)] = V4Fp4Mlp{};
      }
    }
  };
  return out;
}

Status DeepseekV4::set_expert_parallel(parallel::EpGroup* ep, const ForwardContext& ctx) {
  if (all_experts_.empty()) {  // first call: every expert's views, for staging
    for (const V4LayerWeights& L : w_.layers)
      all_experts_.push_back({L.moe.experts, L.moe.fp4_experts});
  }
  if (!ep) {  // every expert again
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      w_.layers[l].moe.experts = all_experts_[l].bf16;
      w_.layers[l].moe.fp4_experts = all_experts_[l].fp4;
    }
    ep_ = nullptr;
    return Status::ok();
  }
  DI_ASSIGN_OR_RETURN(parallel::StagedExperts mine, stage_experts(ep->placement(), ep->rank()));
  mine.install();
  ep_ = ep;
  ep_ctx_ = ctx;
  ep->set_local_experts([this](int layer, const int32_t* slots, const float* x, int64_t n,
                               float* y) {
    DI_CHECK(layer >= 0 && layer < v4_.num_layers, "expert parallel: no MoE layer {}", layer);
    const V4Moe& m = w_.layers[size_t(layer)].moe;
    ep_run_local_experts(ep_->placement(), layer, slots, x, n, v4_.hidden, y,
                         [&](int e, const float* xe, int64_t rows, float* ye) {
                           DI_CHECK(v4_expert_held(m, e),
                                    "expert {} of layer {} is not loaded on this rank", e, layer);
                           v4_expert_forward(moe_, m, e, xe, rows, ye, ep_scratch_, ep_ctx_);
                         });
  });
  ep->set_expert_stager(
      [this](const parallel::EpPlacement& next, int rank) { return stage_experts(next, rank); });
  return Status::ok();
}

}  // namespace deepinfer::model
