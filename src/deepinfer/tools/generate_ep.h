// `generate --ep N`: expert parallelism over N processes. Run under `mpirun -n N` (each rank
// takes every N-th request), or without mpirun, in which case generate starts
// `mpirun -n N` on itself. See docs/parallel.md.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {

struct EpFlags {
  int ep = 1;
  std::string eplb_trace;  // place experts with EPLB from this trace (else contiguous)
  int redundant = 0;       // redundant expert replicas (with --eplb-trace, or live EPLB)
  // serve only: live EPLB every this many busy steps; -1 = the default (kDefaultEplbInterval
  // with --redundant > 0, else off), 0 = off.
  int eplb_interval = -1;
  int eplb_window = 1000;  // serve only: busy steps of per-expert load a rebalance places from
};
inline constexpr int kDefaultEplbInterval = 3000;
// The live-EPLB interval the flags ask for (0 = off).
int eplb_interval(const EpFlags& f);
void add_ep_flags(CLI::App& app, EpFlags& f);

// The placement the flags ask for, for this model; InvalidArgument (one line) when it cannot be.
Result<parallel::EpPlacement> ep_placement(const EpFlags& f, const model::ModelConfig& config);
// The model supports --ep and the placement fits it (checked before starting any rank).
Status check_ep_model(const EpFlags& f, const engine::LoadedModel& loaded);
// Re-runs this command line under `mpirun -n ep [extra_mpirun_args]` and returns its exit
// status. SIGINT and SIGTERM are forwarded: to rank 0 once it wrote its pid to `rank0_pidfile`
// (given to the ranks as $DEEPINFER_EP_RANK0_PIDFILE; empty = none), else to mpirun.
int spawn_mpirun(int ep, const std::vector<std::string>& extra_mpirun_args = {},
                 const std::string& rank0_pidfile = "");
// A rank other than 0 of an mpirun job (it keeps quiet: rank 0 prints results and errors).
bool is_secondary_rank();
// Joins the MPI job, sets the placement and attaches it to the model (before make_engine).
Result<std::unique_ptr<parallel::EpGroup>> join_ep(const EpFlags& f, engine::LoadedModel& loaded,
                                                   const EngineFlags& engine_flags);

}  // namespace deepinfer::tools
