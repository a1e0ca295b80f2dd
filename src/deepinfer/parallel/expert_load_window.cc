#include "deepinfer/parallel/expert_load_window.h"

#include <algorithm>
#include <map>

namespace deepinfer::parallel {

ExpertLoadWindow::ExpertLoadWindow(int ranks, int num_layers, int num_experts, int window_steps)
    : ranks_(ranks),
      layers_(num_layers),
      experts_(num_experts),
      window_(std::max(window_steps, 1)),
      expert_sum_(size_t(num_layers) * size_t(num_experts), 0),
      rank_sum_(size_t(ranks) * size_t(num_layers), 0) {}

void ExpertLoadWindow::add(const std::vector<SparseExpertRows>& per_rank) {
  std::map<uint32_t, uint32_t> expert;  // ordered and merged over ranks
  std::map<uint32_t, uint32_t> rank;
  const uint32_t cells = uint32_t(expert_sum_.size());
  for (size_t r = 0; r < per_rank.size() && r < size_t(ranks_); ++r) {
    for (const auto& [i, n] : per_rank[r]) {
      if (i >= cells || n == 0) continue;
      expert[i] += n;
      rank[uint32_t(r) * uint32_t(layers_) + i / uint32_t(experts_)] += n;
    }
  }
  if (expert.empty()) return;
  Step s{{expert.begin(), expert.end()}, {rank.begin(), rank.end()}};
  apply(s, false);
  steps_.push_back(std::move(s));
  if (int(steps_.size()) > window_) {
    apply(steps_.front(), true);
    steps_.pop_front();
  }
}

void ExpertLoadWindow::apply(const Step& s, bool remove) {
  for (const auto& [i, n] : s.expert)
    expert_sum_[i] = remove ? expert_sum_[i] - n : expert_sum_[i] + n;
  for (const auto& [i, n] : s.rank) rank_sum_[i] = remove ? rank_sum_[i] - n : rank_sum_[i] + n;
}

void ExpertLoadWindow::clear() {
  steps_.clear();
  std::fill(expert_sum_.begin(), expert_sum_.end(), 0);
  std::fill(rank_sum_.begin(), rank_sum_.end(), 0);
}

std::vector<int> ExpertLoadWindow::active_layers() const {
  std::vector<int> out;
  for (int l = 0; l < layers_; ++l) {
    uint64_t sum = 0;
    for (int r = 0; r < ranks_; ++r) sum += rank_layer_rows(r, l);
    if (sum > 0) out.push_back(l);
  }
  return out;
}

double ExpertLoadWindow::layer_imbalance() const {
  const std::vector<int> layers = active_layers();
  if (layers.empty()) return 0.0;
  double total = 0;
  for (int l : layers) {
    uint64_t sum = 0, top = 0;
    for (int r = 0; r < ranks_; ++r)
      sum += rank_layer_rows(r, l), top = std::max(top, rank_layer_rows(r, l));
    total += double(top) * ranks_ / double(sum);
  }
  return total / double(layers.size());
}

double planned_layer_imbalance(const EpPlacement& p, const std::vector<uint64_t>& load,
                               const std::vector<int>& layers) {
  double total = 0;
  int counted = 0;
  const int per = p.slots_per_rank();
  for (int l : layers) {
    std::vector<double> rank_load(size_t(p.ranks), 0.0);
    double sum = 0;
    for (int s = 0; s < p.num_physical; ++s) {
      const size_t e = size_t(l) * p.num_experts + p.phy2log[size_t(l) * p.num_physical + s];
      const double share = double(load[e]) / p.logcnt[e];
      rank_load[size_t(s / per)] += share;
      sum += share;
    }
    if (sum <= 0) continue;
    total += *std::max_element(rank_load.begin(), rank_load.end()) * p.ranks / sum;
    ++counted;
  }
  return counted ? total / counted : 0.0;
}

}  // namespace deepinfer::parallel
