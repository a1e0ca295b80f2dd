// One rank's side of a live rebalance (rebalancer.h has rank 0's): stages the experts a new
// placement gives this rank on a background thread (the checkpoint read happens while the rank
// keeps stepping with the old placement), reports when they are ready, and switches weights and
// placement together between two steps when rank 0 says so.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::parallel {

class PlacementSwitch {
 public:
  using Install = std::function<void(EpPlacement)>;
  // `stage` reads this rank's new experts (ExpertStager); `install` puts a placement in use.
  PlacementSwitch(int rank, ExpertStager stage, Install install);
  ~PlacementSwitch();
  PlacementSwitch(const PlacementSwitch&) = delete;
  PlacementSwitch& operator=(const PlacementSwitch&) = delete;

  // Starts staging `p` as `epoch` (any earlier staging is waited for and dropped).
  void prepare(int64_t epoch, EpPlacement p);
  // Polls the staging: the epoch staged and ready (0 = none), or its error once (then 0).
  int64_t staged_epoch();
  std::string take_error();
  int staged_loaded() const { return staged_ ? staged_->loaded : 0; }
  // Installs the staged experts and `epoch`'s placement. Every rank reported `epoch` staged
  // before rank 0 asks for this; anything else is a broken invariant.
  void switch_to(int64_t epoch);
  int64_t epoch() const { return epoch_; }

 private:
  void poll(bool wait);

  int rank_;
  ExpertStager stage_;
  Install install_;
  int64_t epoch_ = 0;          // in use
  int64_t staging_epoch_ = 0;  // being staged or staged
  EpPlacement staging_placement_;
  std::future<Result<StagedExperts>> future_;
  std::optional<StagedExperts> staged_;
  std::string error_;
};

}  // namespace deepinfer::parallel
