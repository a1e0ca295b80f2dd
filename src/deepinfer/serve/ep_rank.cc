#include "deepinfer/serve/ep_rank.h"

#include <chrono>
#include <thread>

#include "deepinfer/base/check.h"

namespace deepinfer::serve::ep {

EpRank::EpRank(engine::Engine& engine, parallel::EpGroup& group)
    : engine_(engine), group_(group),
      switch_(group.rank(), group.expert_stager(), [&group](parallel::EpPlacement p) { group.set_placement(std::move(p)); }) {}

// Stage a proposed placement (in the background), or switch to a staged one before this step.
void EpRank::rebalance(const parallel::RebalanceAction& a) {
  if (a.prepare_epoch > 0) {
    const parallel::EpPlacement& now = group_.placement();
    Result<parallel::EpPlacement> next =
        parallel::placement_from_phy2log(a.phy2log, now.num_layers, now.num_experts, now.num_physical, now.ranks);
    DI_CHECK(next.is_ok(), "{}", next.status().message());  // rank 0 built it from a valid one
    switch_.prepare(a.prepare_epoch, std::move(next).value());
  }
  if (a.switch_epoch > 0) switch_.switch_to(a.switch_epoch);
}

std::optional<std::vector<RankReport>> EpRank::iterate(const Control& control) {
  const bool root = group_.rank() == 0;
  // Every rank knows whether the last step left work anywhere, so all take the same branch.
  const std::string bytes = group_.broadcast(root ? encode_control(control) : std::string(), !any_work_);
  Result<Control> c = decode_control(bytes);
  DI_CHECK(c.is_ok(), "{}", c.status().message());
  if (c->stop) {
    if (on_stop_) on_stop_();
    for (const auto& [server_id, local_id] : local_of_) engine_.abort(local_id);
    local_of_.clear();
    server_of_.clear();
    return std::nullopt;
  }
  rebalance(c->rebalance);
  RankReport report;
  apply(*c, report);
  std::vector<engine::RequestOutput> outputs;
  if (engine_.has_unfinished()) {
    outputs = engine_.step();
    // Only grammar compiles pending: nothing to compute yet, so don't spin on the cores.
    if (outputs.empty() && engine_.num_running() == 0 && engine_.num_waiting() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  any_work_ = group_.step_barrier(engine_.has_unfinished());
  report = finish_step(std::move(outputs), std::move(report));
  const std::vector<std::string> parts = group_.gather_to_root(encode_report(report));
  std::vector<RankReport> reports;
  for (const std::string& p : parts) {
    Result<RankReport> r = decode_report(p);
    DI_CHECK(r.is_ok(), "{}", r.status().message());
    reports.push_back(std::move(r).value());
  }
  return reports;
}

void EpRank::apply(const Control& c, RankReport& report) {
  for (const Assignment& a : c.add) {
    if (a.rank != group_.rank()) continue;
    Result<int64_t> id = engine_.add_request(a.request);
    report.accepted.emplace_back(a.id, id.status());
    if (!id.is_ok()) continue;
    local_of_[a.id] = *id;
    server_of_[*id] = a.id;
  }
  for (int64_t server_id : c.abort) {
    auto it = local_of_.find(server_id);
    if (it == local_of_.end()) continue;  // another rank's, or already finished
    engine_.abort(it->second);
    server_of_.erase(it->second);
    local_of_.erase(it);
  }
}

RankReport EpRank::finish_step(std::vector<engine::RequestOutput> outputs, RankReport report) {
  for (engine::RequestOutput& out : outputs) {
    auto it = server_of_.find(out.request_id);
    if (it == server_of_.end()) continue;  // aborted meanwhile
    const int64_t local_id = out.request_id;
    out.request_id = it->second;
    if (out.finished) {
      local_of_.erase(it->second);
      server_of_.erase(local_id);
    }
    report.outputs.push_back(std::move(out));
  }
  const auto& kv = engine_.kv_stats();
  report.running = engine_.num_running();
  report.waiting = engine_.num_waiting();
  report.kv_blocks = engine_.kv_num_blocks();
  report.kv_blocks_in_use = engine_.kv_num_blocks() - engine_.kv_num_available_blocks();
  report.prefix_lookup_tokens = kv.admitted_tokens;
  report.prefix_hit_tokens = kv.hit_tokens;
  report.steps = engine_.stats().steps;
  report.moe_rows = group_.expert_rows_computed();
  report.rebalance.rows = group_.take_expert_rows();
  report.rebalance.staged_epoch = switch_.staged_epoch();
  report.rebalance.stage_error = switch_.take_error();
  report.rebalance.experts_loaded = switch_.staged_loaded();
  return report;
}

void EpRank::run() {
  while (iterate(Control{})) {
  }
}

}  // namespace deepinfer::serve::ep
