// Per-expert MoE load over a sliding window of steps, on rank 0 of `serve --ep N`: each rank's
// rows per (layer, logical expert), as its experts computed them. Live rebalancing places experts
// from the window's expert loads (EPLB); /metrics reports the window's per-layer imbalance.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::parallel {

class ExpertLoadWindow {
 public:
  ExpertLoadWindow(int ranks, int num_layers, int num_experts, int window_steps);

  // One step: the rows of each rank (rank order). A step without rows (idle, dense only) is not
  // counted. Indices outside layers x experts are ignored.
  void add(const std::vector<SparseExpertRows>& per_rank);
  // Forget every step (after a rebalance: the window then measures the new placement).
  void clear();

  int steps() const { return int(steps_.size()); }
  int window_steps() const { return window_; }
  // [num_layers * num_experts] rows of each logical expert over the window, all ranks.
  const std::vector<uint64_t>& expert_load() const { return expert_sum_; }
  // Rows rank r computed in layer l over the window.
  uint64_t rank_layer_rows(int rank, int layer) const {
    return rank_sum_[size_t(rank) * layers_ + layer];
  }
  // Layers with any rows in the window (the MoE layers that ran), ascending.
  std::vector<int> active_layers() const;
  // The busiest rank's rows over the mean rank's, per active layer, averaged over those layers
  // (each MoE layer is a collective: its slowest rank holds the others up). 0 without data.
  double layer_imbalance() const;

 private:
  struct Step {
    std::vector<std::pair<uint32_t, uint32_t>> expert;  // (layer * E + e, rows), all ranks
    std::vector<std::pair<uint32_t, uint32_t>> rank;    // (rank * L + layer, rows)
  };
  void apply(const Step& s, bool remove);

  int ranks_, layers_, experts_, window_;
  std::deque<Step> steps_;
  std::vector<uint64_t> expert_sum_;  // [layers * experts]
  std::vector<uint64_t> rank_sum_;    // [ranks * layers]
};

// EPLB's modelled imbalance of placement `p` for per-expert loads `load` [num_layers * E]: each
// expert's load split evenly over its replicas, busiest rank over mean per layer in `layers`,
// averaged. What a placement should achieve on that load.
double planned_layer_imbalance(const EpPlacement& p, const std::vector<uint64_t>& load,
                               const std::vector<int>& layers);

}  // namespace deepinfer::parallel
