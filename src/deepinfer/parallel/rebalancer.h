// Live EPLB on rank 0 of `serve --ep N` (docs/parallel.md): keeps the per-expert load window,
// decides every `interval_steps` busy steps whether EPLB's placement for the window's load beats
// the current one, and runs the two-phase switch: the new placement goes out in one step's
// control (every rank stages its new experts off the step path), and once every rank reported it
// staged, a later control tells all ranks to switch before that step. No step sees a mix.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/expert_load_window.h"

namespace deepinfer::parallel {

struct RebalanceOptions {
  int interval_steps = 0;   // busy steps (steps with MoE rows) between rebalances; 0 = never
  int window_steps = 1000;  // busy steps of load a rebalance places from
  int num_groups = 1;       // expert groups (n_group), for EPLB's hierarchical policy
  int num_nodes = 1;
  double min_gain = 0.01;  // switch only when EPLB's plan is this much (relatively) more even
};

struct RebalanceStats {
  int64_t rebalances = 0;           // switches done
  int64_t epoch = 0;                // the placement in use (0 = the one at start)
  int64_t experts_loaded = 0;       // (rank, layer, expert) weights read by all switches
  int64_t failed = 0;               // proposals dropped because a rank could not stage them
  double imbalance_before = 0;      // measured on the window before the last switch
  int64_t window_steps_before = 0;  // busy steps in that window
  double imbalance_planned = 0;     // EPLB's model of the new placement on that window
  double last_switch_seconds = 0;   // proposal to switch (staging on every rank), last rebalance
  std::string last_error;           // why the last failed proposal failed
};

// The rebalance part of the next step's control.
struct RebalanceAction {
  int64_t prepare_epoch = 0;     // > 0: every rank stages `phy2log`
  std::vector<int32_t> phy2log;  // [num_layers * num_physical], with prepare_epoch
  int64_t switch_epoch = 0;      // > 0: every rank switches to that staged epoch before stepping
};

// Each rank's part of a step's report that concerns rebalancing.
struct RankRebalanceReport {
  SparseExpertRows rows;     // rows its experts computed in the step
  int64_t staged_epoch = 0;  // newest epoch whose experts it holds ready
  std::string stage_error;   // non-empty: staging the pending epoch failed
  int experts_loaded = 0;    // experts it read for that staged epoch
};

class Rebalancer {
 public:
  Rebalancer(const RebalanceOptions& o, EpPlacement initial);

  // After each step, every rank's report (rank order).
  void observe(const std::vector<RankRebalanceReport>& reports);
  // What the next control carries; a proposal and a switch are each handed out once.
  RebalanceAction next();

  RebalanceStats stats() const;
  double window_imbalance() const;
  int window_steps() const;
  EpPlacement placement() const;

 private:
  void propose();  // mu_ held

  struct Pending {
    int64_t epoch = 0;
    EpPlacement placement = {};
    double planned = 0;
    std::chrono::steady_clock::time_point since = {};
    bool sent = false;
    bool staged = false;  // every rank has it ready
    int64_t loaded = 0;
  };

  mutable std::mutex mu_;  // /metrics reads from another thread
  RebalanceOptions opt_;
  EpPlacement current_;
  ExpertLoadWindow window_;
  std::optional<Pending> pending_;
  int64_t next_epoch_ = 1;
  int64_t busy_since_ = 0;  // busy steps since start or the last switch
  RebalanceStats stats_;
};

}  // namespace deepinfer::parallel
