// Per-transfer bookkeeping for KvSender::flush: how many messages of each transfer are still in
// flight, the first error, and a wait with a deadline. Thread-safe; knows nothing of UCX.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "deepinfer/base/status.h"

namespace deepinfer::transfer {

class TransferLedger {
 public:
  // A message of `transfer_id` to `peer` (a short label for messages) was queued.
  void add(uint64_t transfer_id, const std::string& peer);
  // One message of `transfer_id` finished: delivered (ok) or failed with `status`.
  void finish(uint64_t transfer_id, const Status& status);
  // Waits until nothing of `transfer_id` is in flight or `timeout` passes. The first failure
  // (or the timeout) as an error naming the transfer and peer; a transfer never added is OK.
  // After a wait returns, the record is dropped as soon as nothing of it is in flight: what
  // finishes later is not reported again, and a later wait covers only later messages.
  Status wait(uint64_t transfer_id, std::chrono::milliseconds timeout);
  size_t transfers_tracked() const;  // records still held (tests: nothing leaks)

 private:
  struct Entry {
    int64_t queued = 0;     // messages added since the record was created
    int64_t in_flight = 0;  // added and not finished
    int64_t failed = 0;
    Status first_error;
    std::string peer;     // the peer of the latest message
    bool waited = false;  // a wait returned while messages were in flight: drop when idle
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace deepinfer::transfer
