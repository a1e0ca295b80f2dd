// The EPLB planner: for a recorded expert load trace and an EP size, the slowest rank's token
// load over the average rank's, with experts placed contiguously (no replicas) and with EPLB's
// placement (with redundant replicas), for clusters larger than this machine.
#pragma once

#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/parallel/eplb.h"
#include "deepinfer/parallel/expert_trace.h"

namespace deepinfer::parallel {

struct PlanRequest {
  int ep = 1;         // ranks
  int redundant = 0;  // replicas beyond one per expert
  int num_groups = 1;
  int num_nodes = 1;
};

struct PlanResult {
  int ep = 0;
  int num_physical = 0;
  // max rank load / mean rank load, averaged over the trace's MoE layers (worst layer apart).
  // Static = each expert on one rank, E/ep contiguous experts per rank (or, when ep > E, every
  // expert copied ep/E times with its load split evenly); negative when neither divides.
  double static_mean = -1, static_worst = -1;
  double eplb_mean = 0, eplb_worst = 0;
  // The same over the trace's step windows, EPLB placed from the total (as a periodic rebalance
  // would have placed it from past load); negative without windows.
  double static_windows = -1, eplb_windows = -1;
};

// Load of each rank for one layer: each expert's load split evenly over its replicas.
std::vector<double> rank_loads(const std::vector<uint64_t>& counts, const int32_t* phy2log,
                               const int32_t* logcnt, int num_physical, int ep);

// InvalidArgument (naming the sizes) when the request does not fit the trace.
Result<PlanResult> plan_eplb(const ExpertTrace& trace, const PlanRequest& req);

}  // namespace deepinfer::parallel
