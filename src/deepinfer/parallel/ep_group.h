// Expert parallelism across processes: ranks started by `mpirun`, each holding its own
// sequences (attention is data-parallel) and serving the expert slots its placement gives it.
// A MoE layer sends each (token, expert) row to the rank holding the chosen replica and gets the
// expert's output back (MPI all-to-all-v, counts first). Ranks step in lockstep: a rank without
// work waits in step_barrier(), still answering the other ranks' MoE layers with zero rows of
// its own. Built on Open MPI when CMake finds it; otherwise init() refuses with a clear error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::parallel {

struct EplbPlacement;

// Which rank holds which expert, per model layer: num_physical slots, slot s on rank
// s / (num_physical / ranks). Rows exist for every model layer (dense ones unused).
struct EpPlacement {
  int num_layers = 0, num_experts = 0, num_physical = 0, ranks = 1, max_replicas = 1;
  std::vector<int32_t> phy2log;  // [num_layers, num_physical]
  std::vector<int32_t> log2phy;  // [num_layers, num_experts, max_replicas], -1 padded
  std::vector<int32_t> logcnt;   // [num_layers, num_experts]

  int slots_per_rank() const { return num_physical / ranks; }
  // The replica of `expert` that row `key` uses: a fixed function of the key (never timing).
  int32_t slot_for(int layer, int expert, int64_t key) const {
    const size_t i = size_t(layer) * num_experts + expert;
    return log2phy[i * max_replicas + size_t(key % logcnt[i])];
  }
};
// Experts 0..E-1 laid out contiguously, E / ranks per rank, no replicas. InvalidArgument (one
// line) when ranks do not divide the experts.
Result<EpPlacement> contiguous_placement(int num_layers, int num_experts, int ranks);
// EPLB's placement for the model layers `layers` (the trace's rows); other layers contiguous.
Result<EpPlacement> placement_from_eplb(const EplbPlacement& p, const std::vector<int>& layers,
                                        int num_layers, int ranks);

// Placement rebuilt from its slot table phy2log [num_layers, num_physical] (as broadcast for a
// live rebalance): replica i of an expert is its i-th slot in slot order. InvalidArgument when a
// value is out of range, an expert has no slot, or `ranks` does not divide num_physical.
Result<EpPlacement> placement_from_phy2log(std::vector<int32_t> phy2log, int num_layers,
                                           int num_experts, int num_physical, int ranks);
// The logical experts placement `p` gives `rank` in `layer` (ascending, each once).
std::vector<int> experts_on_rank(const EpPlacement& p, int layer, int rank);

// Runs this rank's experts: rows x [n, hidden] for physical slots slots[n] (all on this rank)
// into y [n, hidden].
using LocalExperts =
    std::function<void(int layer, const int32_t* slots, const float* x, int64_t n, float* y)>;

// A live rebalance's weight move on one rank (docs/parallel.md): the experts a new placement
// gives this rank that it lacks, loaded off the step path, and `install`, which puts them in use
// and drops the experts the placement no longer gives it. install runs between two steps.
struct StagedExperts {
  std::function<void()> install = {};
  int loaded = 0;   // experts (per layer) read for this rank
  int dropped = 0;  // experts it stops holding
};
// Stages `p` for `rank`; may run on another thread than the steps (it only reads the checkpoint).
using ExpertStager = std::function<Result<StagedExperts>(const EpPlacement& p, int rank)>;

// (layer * num_experts + expert, rows): an expert's rows in a step, nonzero entries only.
using SparseExpertRows = std::vector<std::pair<uint32_t, uint32_t>>;

class EpGroup {
 public:
  // Joins the MPI job (MPI_Init); Unsupported without MPI in this build, InvalidArgument when
  // the job's size is not `expected_ranks`.
  static Result<std::unique_ptr<EpGroup>> init(int expected_ranks);
  // True when this process was started by mpirun (Open MPI's environment).
  static bool launched_by_mpirun();
  // False in a build without MPI (init() then refuses).
  static bool available();
  virtual ~EpGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  void set_placement(EpPlacement p) {
    placement_ = std::move(p);  // row counts are per logical expert: they survive a new placement
    expert_rows_.resize(size_t(placement_.num_layers) * size_t(placement_.num_experts), 0);
  }
  const EpPlacement& placement() const { return placement_; }
  void set_local_experts(LocalExperts fn) { local_ = std::move(fn); }
  void set_expert_stager(ExpertStager fn) { stager_ = std::move(fn); }
  const ExpertStager& expert_stager() const { return stager_; }

  // One MoE layer, called by every rank in the same order: row i of x [n, hidden] goes to
  // physical slot dest[i]; y [n, hidden] receives its expert's output.
  virtual void exchange(int layer, const int32_t* dest, const float* x, int64_t n, int64_t hidden,
                        float* y) = 0;
  // End of a step: waits for every rank (serving their MoE layers meanwhile); true while any
  // rank still has work.
  virtual bool step_barrier(bool have_work) = 0;
  // Every rank's string, in rank order, on rank 0 (empty elsewhere).
  virtual std::vector<std::string> gather_to_root(const std::string& mine) = 0;
  // True when every rank passes true.
  virtual bool all(bool mine) = 0;
  // Rank 0's `mine` on every rank (the others' `mine` is ignored). `idle`, which every rank must
  // pass alike: a long wait is likely (no rank has work), so ranks other than 0 poll with short
  // sleeps (up to 5 ms) instead of MPI's busy wait, which would hold a core per idle rank.
  virtual std::string broadcast(const std::string& mine, bool idle) = 0;
  // (token, expert) rows this rank's experts computed so far: its MoE load.
  uint64_t expert_rows_computed() const { return rows_computed_; }
  // The rows this rank's experts computed per (layer, logical expert) since the last call: the
  // load statistics a live rebalance places from.
  SparseExpertRows take_expert_rows();

 protected:
  // Counts n rows that arrived for `slots` of `layer`.
  void count_rows(int layer, const int32_t* slots, int64_t n);

  EpPlacement placement_;
  LocalExperts local_;
  ExpertStager stager_;
  uint64_t rows_computed_ = 0;
  std::vector<uint64_t> expert_rows_;  // [num_layers * num_experts] since take_expert_rows()
};

}  // namespace deepinfer::parallel
