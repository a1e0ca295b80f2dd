// /metrics lines of live EPLB in `serve --ep N` (docs/parallel.md): rebalances done, the
// per-layer MoE imbalance of the load window now, before the last switch, and as EPLB planned it.
#pragma once

#include <string>

#include "deepinfer/parallel/rebalancer.h"

namespace deepinfer::serve::ep {

std::string render_rebalance_metrics(const parallel::RebalanceStats& s, double window_imbalance,
                                     int window_steps);

}  // namespace deepinfer::serve::ep
