// Notices at once that a rank of an expert-parallel job is gone (exited, crashed, kill -9, on
// any host): every rank other than 0 holds a TCP connection to rank 0, which the kernel closes
// when the process ends. MPI cannot tell us (a collective with a dead peer waits forever on
// shared memory), and mpirun's own reaction is to end the whole job.
//   rank 0: learns which rank is lost (a callback on its monitor thread) and can tell the
//           surviving ranks to exit (they may be stuck in a collective with the dead one);
//   others: exit (status 1, one line) when rank 0 is gone or tells them to.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::parallel {

class EpGroup;

class EpLiveness {
 public:
  using LostFn = std::function<void(int rank, const std::string& why)>;
  // Collective: every rank calls it once, after EpGroup::init. Rank 0 listens on an ephemeral
  // TCP port of every IPv4 address it has and broadcasts them with a random token; the others
  // connect (loopback last) and introduce themselves. `lost` (rank 0 only) runs once, for the
  // first rank lost while not stopping.
  static Result<std::unique_ptr<EpLiveness>> connect(EpGroup& group, LostFn lost);
  ~EpLiveness();

  // A clean stop has begun: connections closing from now on are expected.
  void set_stopping() { stopping_ = true; }
  // Rank 0, after a loss: every surviving rank exits now.
  void abort_others();

 private:
  EpLiveness(int rank, int size) : rank_(rank), size_(size) {}
  void monitor_root();
  void monitor_secondary();

  int rank_, size_;
  std::vector<int> fds_;  // rank 0: [size] (its own -1); others: [1] (to rank 0)
  int wake_[2] = {-1, -1};
  LostFn lost_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace deepinfer::parallel
