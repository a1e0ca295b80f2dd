#include "deepinfer/parallel/placement_switch.h"

#include <chrono>
#include <utility>

#include "deepinfer/base/check.h"

namespace deepinfer::parallel {

PlacementSwitch::PlacementSwitch(int rank, ExpertStager stage, Install install)
    : rank_(rank), stage_(std::move(stage)), install_(std::move(install)) {}

PlacementSwitch::~PlacementSwitch() {
  if (future_.valid()) future_.wait();
}

void PlacementSwitch::prepare(int64_t epoch, EpPlacement p) {
  if (future_.valid()) future_.wait();
  future_ = {};
  staged_.reset();
  error_.clear();
  staging_epoch_ = epoch;
  staging_placement_ = std::move(p);
  if (!stage_) {
    error_ = "this model cannot move experts between ranks";
    return;
  }
  // The stager gets its own copy: staging_placement_ stays with the loop thread.
  future_ = std::async(std::launch::async,
                       [stage = stage_, p = staging_placement_, r = rank_] { return stage(p, r); });
}

void PlacementSwitch::poll(bool wait) {
  if (!future_.valid()) return;
  if (!wait && future_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  Result<StagedExperts> r = future_.get();
  if (r.is_ok())
    staged_ = std::move(r).value();
  else
    error_ = r.status().message();
}

int64_t PlacementSwitch::staged_epoch() {
  poll(false);
  return staged_ ? staging_epoch_ : 0;
}

std::string PlacementSwitch::take_error() {
  poll(false);
  return std::exchange(error_, std::string());
}

void PlacementSwitch::switch_to(int64_t epoch) {
  poll(true);
  DI_CHECK(staged_ && staging_epoch_ == epoch,
           "expert parallel: switch to placement epoch {} but this rank staged {}", epoch,
           staged_ ? staging_epoch_ : 0);
  if (staged_->install) staged_->install();
  install_(std::move(staging_placement_));
  staged_.reset();
  epoch_ = epoch;
}

}  // namespace deepinfer::parallel
