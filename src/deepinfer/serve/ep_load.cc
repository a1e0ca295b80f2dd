#include "deepinfer/serve/ep_load.h"

#include <algorithm>

#include <fmt/format.h>

namespace deepinfer::serve::ep {

EpLoad::EpLoad(int ranks)
    : ranks_(ranks), running_(size_t(ranks), 0), waiting_(size_t(ranks), 0), up_(size_t(ranks), true),
      rows_total_(size_t(ranks), 0), window_sum_(size_t(ranks), 0) {}

void EpLoad::update(const std::vector<RankReport>& reports) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> step(size_t(ranks_), 0);
  uint64_t any = 0;
  for (size_t r = 0; r < reports.size() && r < size_t(ranks_); ++r) {
    running_[r] = reports[r].running;
    waiting_[r] = reports[r].waiting;
    step[r] = reports[r].moe_rows - std::min(rows_total_[r], reports[r].moe_rows);
    rows_total_[r] = reports[r].moe_rows;
    any += step[r];
  }
  if (any == 0) return;  // idle or dense-only steps say nothing about balance
  for (size_t r = 0; r < step.size(); ++r) window_sum_[r] += step[r];
  window_.push_back(std::move(step));
  if (window_.size() > size_t(kWindowSteps)) {
    for (size_t r = 0; r < window_sum_.size(); ++r) window_sum_[r] -= window_.front()[r];
    window_.pop_front();
  }
}

void EpLoad::set_lost(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank >= 0 && rank < ranks_) up_[size_t(rank)] = false;
}

double EpLoad::imbalance_locked() const {
  uint64_t sum = 0, top = 0;
  for (uint64_t x : window_sum_) sum += x, top = std::max(top, x);
  return sum == 0 ? 0.0 : double(top) * double(ranks_) / double(sum);
}

double EpLoad::imbalance() const {
  std::lock_guard<std::mutex> lock(mu_);
  return imbalance_locked();
}

std::string EpLoad::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto head = [&out](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  head("deepinfer_ep_ranks", "gauge", "Expert-parallel ranks of this server");
  out += fmt::format("deepinfer_ep_ranks {}\n", ranks_);
  head("deepinfer_ep_rank_up", "gauge", "1 while the rank is alive, 0 once it was lost");
  for (int r = 0; r < ranks_; ++r) out += fmt::format("deepinfer_ep_rank_up{{rank=\"{}\"}} {}\n", r, up_[size_t(r)] ? 1 : 0);
  head("deepinfer_ep_rank_running_sequences", "gauge", "Sequences in the rank's running batch");
  for (int r = 0; r < ranks_; ++r)
    out += fmt::format("deepinfer_ep_rank_running_sequences{{rank=\"{}\"}} {}\n", r, running_[size_t(r)]);
  head("deepinfer_ep_rank_waiting_sequences", "gauge", "Sequences queued in the rank's engine");
  for (int r = 0; r < ranks_; ++r)
    out += fmt::format("deepinfer_ep_rank_waiting_sequences{{rank=\"{}\"}} {}\n", r, waiting_[size_t(r)]);
  head("deepinfer_ep_rank_moe_rows_total", "counter",
       "(token, expert) rows computed by the rank's experts (its MoE load), all MoE layers");
  for (int r = 0; r < ranks_; ++r)
    out += fmt::format("deepinfer_ep_rank_moe_rows_total{{rank=\"{}\"}} {}\n", r, rows_total_[size_t(r)]);
  head("deepinfer_ep_rank_moe_rows_window", "gauge", "The rank's MoE rows over the last 64 steps that had any");
  for (int r = 0; r < ranks_; ++r)
    out += fmt::format("deepinfer_ep_rank_moe_rows_window{{rank=\"{}\"}} {}\n", r, window_sum_[size_t(r)]);
  head("deepinfer_ep_moe_imbalance", "gauge",
       "Busiest rank's MoE rows over the mean rank's, last 64 steps that had any (1 = even; 0 = no data)");
  out += fmt::format("deepinfer_ep_moe_imbalance {:.6f}\n", imbalance_locked());
  head("deepinfer_ep_window_steps", "gauge", "Steps in the imbalance window now");
  out += fmt::format("deepinfer_ep_window_steps {}\n", window_.size());
  return out;
}

}  // namespace deepinfer::serve::ep
