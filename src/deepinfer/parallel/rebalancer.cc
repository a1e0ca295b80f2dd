#include "deepinfer/parallel/rebalancer.h"

#include "deepinfer/parallel/eplb.h"

namespace deepinfer::parallel {

Rebalancer::Rebalancer(const RebalanceOptions& o, EpPlacement initial)
    : opt_(o),
      current_(std::move(initial)),
      window_(current_.ranks, current_.num_layers, current_.num_experts, o.window_steps) {}

void Rebalancer::observe(const std::vector<RankRebalanceReport>& reports) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SparseExpertRows> rows;
  bool any_rows = false;
  for (const RankRebalanceReport& r : reports)
    rows.push_back(r.rows), any_rows = any_rows || !r.rows.empty();
  window_.add(rows);
  if (any_rows) ++busy_since_;
  if (pending_ && pending_->sent && !pending_->staged) {
    bool all = true;
    int64_t loaded = 0;
    for (const RankRebalanceReport& r : reports) {
      if (!r.stage_error.empty()) {
        stats_.failed += 1;
        stats_.last_error = r.stage_error;
        pending_.reset();
        busy_since_ = 0;
        return;
      }
      all = all && r.staged_epoch >= pending_->epoch;
      loaded += r.experts_loaded;
    }
    if (all) pending_->staged = true, pending_->loaded = loaded;
  }
  if (!pending_ && opt_.interval_steps > 0 && busy_since_ >= opt_.interval_steps) propose();
}

void Rebalancer::propose() {
  busy_since_ = 0;
  const std::vector<int> layers = window_.active_layers();
  if (layers.empty()) return;
  const int E = current_.num_experts, P = current_.num_physical;
  std::vector<float> w;
  for (int l : layers)
    for (int e = 0; e < E; ++e) w.push_back(float(window_.expert_load()[size_t(l) * E + e]));
  const int groups = E % opt_.num_groups == 0 ? opt_.num_groups : 1;
  const EplbOptions eo{.num_physical = P,
                       .num_groups = groups,
                       .num_nodes = opt_.num_nodes,
                       .num_gpus = current_.ranks};
  Result<EplbPlacement> plan = eplb_rebalance(w, int(layers.size()), E, eo);
  if (!plan.is_ok()) {
    stats_.failed += 1;
    stats_.last_error = plan.status().message();
    return;
  }
  // The traced layers get EPLB's slots; the others keep theirs.
  std::vector<int32_t> phy2log = current_.phy2log;
  for (size_t i = 0; i < layers.size(); ++i)
    for (int s = 0; s < P; ++s) phy2log[size_t(layers[i]) * P + s] = plan->phy2log[i * P + s];
  Result<EpPlacement> next =
      placement_from_phy2log(std::move(phy2log), current_.num_layers, E, P, current_.ranks);
  if (!next.is_ok()) {
    stats_.failed += 1;
    stats_.last_error = next.status().message();
    return;
  }
  const double now = planned_layer_imbalance(current_, window_.expert_load(), layers);
  const double planned = planned_layer_imbalance(*next, window_.expert_load(), layers);
  if (!(planned < now * (1.0 - opt_.min_gain))) return;  // not worth moving weights for
  Pending p;
  p.epoch = next_epoch_++;
  p.placement = std::move(next).value();
  p.planned = planned;
  p.since = std::chrono::steady_clock::now();
  pending_ = std::move(p);
}

RebalanceAction Rebalancer::next() {
  std::lock_guard<std::mutex> lock(mu_);
  RebalanceAction a;
  if (!pending_) return a;
  if (!pending_->sent) {
    pending_->sent = true;
    a.prepare_epoch = pending_->epoch;
    a.phy2log = pending_->placement.phy2log;
    return a;
  }
  if (!pending_->staged) return a;
  // Switch: the window so far measured the old placement; from this step on it measures the new.
  a.switch_epoch = pending_->epoch;
  stats_.rebalances += 1;
  stats_.epoch = pending_->epoch;
  stats_.experts_loaded += pending_->loaded;
  stats_.imbalance_before = window_.layer_imbalance();
  stats_.window_steps_before = window_.steps();
  stats_.imbalance_planned = pending_->planned;
  stats_.last_switch_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - pending_->since).count();
  current_ = std::move(pending_->placement);
  pending_.reset();
  window_.clear();
  busy_since_ = 0;
  return a;
}

RebalanceStats Rebalancer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

double Rebalancer::window_imbalance() const {
  std::lock_guard<std::mutex> lock(mu_);
  return window_.layer_imbalance();
}

int Rebalancer::window_steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return window_.steps();
}

EpPlacement Rebalancer::placement() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

}  // namespace deepinfer::parallel
