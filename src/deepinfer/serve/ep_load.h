// /metrics lines of `serve --ep N` (rank 0): per rank, its running and waiting sequences and
// its MoE load (the (token, expert) rows its experts computed), and the imbalance of that load
// (the busiest rank's rows over the mean) over the last kWindowSteps steps that computed any.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/serve/ep_protocol.h"

namespace deepinfer::serve::ep {

class EpLoad {
 public:
  static constexpr int kWindowSteps = 64;
  explicit EpLoad(int ranks);
  // After each step, with every rank's report (rank order). Thread-safe.
  void update(const std::vector<RankReport>& reports);
  void set_lost(int rank);
  // Max over mean of the window's per-rank rows; 0 before any MoE row.
  double imbalance() const;
  std::string render() const;

 private:
  double imbalance_locked() const;

  mutable std::mutex mu_;
  int ranks_;
  std::vector<int> running_, waiting_;
  std::vector<bool> up_;
  std::vector<uint64_t> rows_total_;
  std::deque<std::vector<uint64_t>> window_;  // per step with rows: rows per rank
  std::vector<uint64_t> window_sum_;
};

}  // namespace deepinfer::serve::ep
