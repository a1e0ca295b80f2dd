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
  // Sleeps until the worker has an event, signal() is called, or `timeout` passes. Call only
  // after progress() returned false.
  void wait(std::chrono::milliseconds timeout);
  void signal();  // from any thread: wakes wait()

 private:
  UcpWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::string address_hex_;
};

}  // namespace deepinfer::transfer
