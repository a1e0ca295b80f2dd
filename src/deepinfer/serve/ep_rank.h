// One rank of `serve --ep N`: its engine and the per-step exchange every rank makes together
// (docs/parallel.md): rank 0's Control is broadcast, each rank applies what concerns it and
// steps its engine (the MoE all-to-all runs inside; a rank without work serves the others' MoE
// layers from the step barrier), then every rank's RankReport is gathered on rank 0. Ranks
// other than 0 just call run() until rank 0 says stop. A live rebalance's placement switch
// happens here, before a step, on every rank in the same iteration.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/placement_switch.h"
#include "deepinfer/serve/ep_protocol.h"

namespace deepinfer::serve::ep {

class EpRank {
 public:
  EpRank(engine::Engine& engine, parallel::EpGroup& group);

  // One collective iteration. `control` is read on rank 0 only. nullopt: the control said stop
  // (every rank ended its requests). Rank 0 gets every rank's report, in rank order.
  std::optional<std::vector<RankReport>> iterate(const Control& control);
  // Whether any rank had work at the last step barrier (every rank agrees on it).
  bool any_work() const { return any_work_; }
  // Ranks other than 0: iterate until stop.
  void run();
  engine::Engine& engine() { return engine_; }
  // Runs when a stop control arrives, before anything else.
  void set_on_stop(std::function<void()> fn) { on_stop_ = std::move(fn); }

 private:
  void apply(const Control& c, RankReport& report);
  void rebalance(const parallel::RebalanceAction& a);
  RankReport finish_step(std::vector<engine::RequestOutput> outputs, RankReport report);

  engine::Engine& engine_;
  parallel::EpGroup& group_;
  bool any_work_ = false;
  std::function<void()> on_stop_;
  parallel::PlacementSwitch switch_;  // live rebalancing: this rank's staged experts
  std::map<int64_t, int64_t> local_of_;   // server id -> engine id
  std::map<int64_t, int64_t> server_of_;  // engine id -> server id
};

}  // namespace deepinfer::serve::ep
