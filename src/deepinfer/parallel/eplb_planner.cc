// EPLB planner (eplb_planner.h).
#include "deepinfer/parallel/eplb_planner.h"

#include <algorithm>
#include <numeric>

namespace deepinfer::parallel {
namespace {

// max / mean of the rank loads; 1 for a layer without load.
double imbalance(const std::vector<double>& loads) {
  const double sum = std::accumulate(loads.begin(), loads.end(), 0.0);
  if (sum <= 0) return 1.0;
  return *std::max_element(loads.begin(), loads.end()) / (sum / static_cast<double>(loads.size()));
}

// The placement without EPLB, in the same form as EPLB's: one slot per (expert, copy).
bool static_placement(int experts, int ep, std::vector<int32_t>& phy2log,
                      std::vector<int32_t>& logcnt) {
  if (experts % ep == 0) {
    phy2log.resize(experts);
    std::iota(phy2log.begin(), phy2log.end(), 0);
    logcnt.assign(experts, 1);
    return true;
  }
  if (ep % experts == 0) {
    const int copies = ep / experts;
    phy2log.resize(ep);
    for (int s = 0; s < ep; ++s) phy2log[s] = s / copies;
    logcnt.assign(experts, copies);
    return true;
  }
  return false;
}

struct Score {
  double sum = 0, worst = 0;
  int n = 0;
  void add(double v) { sum += v, worst = std::max(worst, v), ++n; }
  double mean() const { return n ? sum / n : 0; }
};

}  // namespace

std::vector<double> rank_loads(const std::vector<uint64_t>& counts, const int32_t* phy2log,
                               const int32_t* logcnt, int num_physical, int ep) {
  std::vector<double> loads(ep, 0.0);
  const int per_rank = num_physical / ep;
  for (int s = 0; s < num_physical; ++s) {
    const int e = phy2log[s];
    loads[s / per_rank] += static_cast<double>(counts[e]) / logcnt[e];
  }
  return loads;
}

Result<PlanResult> plan_eplb(const ExpertTrace& trace, const PlanRequest& req) {
  const int E = trace.num_experts, L = static_cast<int>(trace.layers.size());
  if (req.ep < 1) return invalid_argument("--ep {}: want >= 1", req.ep);
  if (req.redundant < 0) return invalid_argument("--redundant {}: want >= 0", req.redundant);
  PlanResult out;
  out.ep = req.ep;
  out.num_physical = E + req.redundant;
  if (out.num_physical % req.ep != 0)
    return invalid_argument(
        "--ep {} does not divide {} physical experts ({} experts + {} redundant)", req.ep,
        out.num_physical, E, req.redundant);
  std::vector<float> weight;
  for (const auto& row : trace.total)
    for (uint64_t v : row) weight.push_back(static_cast<float>(v));
  EplbOptions o{.num_physical = out.num_physical,
                .num_groups = req.num_groups,
                .num_nodes = req.num_nodes,
                .num_gpus = req.ep};
  DI_ASSIGN_OR_RETURN(EplbPlacement p, eplb_rebalance(weight, L, E, o));

  std::vector<int32_t> st_phy, st_cnt;
  const bool has_static = static_placement(E, req.ep, st_phy, st_cnt);
  const int st_physical = static_cast<int>(st_phy.size());
  auto layer_eplb = [&](const ExpertCounts& c, int l) {
    return imbalance(rank_loads(c[l], p.phy2log.data() + size_t(l) * p.num_physical,
                                p.logcnt.data() + size_t(l) * E, p.num_physical, req.ep));
  };
  auto layer_static = [&](const ExpertCounts& c, int l) {
    return imbalance(rank_loads(c[l], st_phy.data(), st_cnt.data(), st_physical, req.ep));
  };
  Score eplb_total, static_total, eplb_win, static_win;
  for (int l = 0; l < L; ++l) {
    eplb_total.add(layer_eplb(trace.total, l));
    if (has_static) static_total.add(layer_static(trace.total, l));
    for (const ExpertCounts& w : trace.windows) {
      eplb_win.add(layer_eplb(w, l));
      if (has_static) static_win.add(layer_static(w, l));
    }
  }
  out.eplb_mean = eplb_total.mean();
  out.eplb_worst = eplb_total.worst;
  if (has_static) out.static_mean = static_total.mean(), out.static_worst = static_total.worst;
  if (!trace.windows.empty()) {
    out.eplb_windows = eplb_win.mean();
    if (has_static) out.static_windows = static_win.mean();
  }
  return out;
}

}  // namespace deepinfer::parallel
