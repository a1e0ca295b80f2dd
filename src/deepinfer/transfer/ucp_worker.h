// One UCP context + worker with this module's transport defaults, driven by a single thread
// (the worker is created single-threaded: only signal() may be called from other threads).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/transfer/kv_transfer.h"

namespace deepinfer::transfer {

std::string ucs_error(ucs_status_t status);  // "Connection reset by remote peer (-25)"

inline constexpr double kSpinSeconds = 0.002;

class UcpWorker {
 public:
  static Result<std::unique_ptr<UcpWorker>> create(const std::string& name);
  ~UcpWorker();
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;

  ucp_worker_h handle() const { return worker_; }
  const std::string& address_hex() const { return address_hex_; }
  // Progresses until the worker has nothing more to do (bounded); true when anything happened.
  bool progress();
  // Once per turn of the thread's loop, with whether the turn did anything: keeps spinning
  // (yielding the CPU) while there was work within the last kSpinSeconds, since a stream of
  // messages completes far faster than a sleep and wake-up; then sleeps on the event fd until
  // the worker has an event, signal() is called, or `sleep_timeout` passes.
  void pace(bool did_work, std::chrono::milliseconds sleep_timeout);
  void signal();  // from any thread: wakes wait()

 private:
  UcpWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  double last_work_ = 0;  // now_seconds() of the last turn that did anything
  std::string address_hex_;
};

}  // namespace deepinfer::transfer
