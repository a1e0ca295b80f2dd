#include "deepinfer/transfer/transfer_ledger.h"

namespace deepinfer::transfer {

void TransferLedger::add(uint64_t transfer_id, const std::string& peer) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[transfer_id];
  if (e.waited) {  // the id is reused after a wait that returned early: start a fresh record
    const int64_t still_in_flight = e.in_flight;
    e = Entry{};
    e.in_flight = still_in_flight;
  }
  e.queued++;
  e.in_flight++;
  e.peer = peer;
}

void TransferLedger::finish(uint64_t transfer_id, const Status& status) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(transfer_id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.in_flight--;
  if (!status.is_ok()) {
    if (e.failed++ == 0) e.first_error = status;
  }
  if (e.in_flight == 0) {
    // Nobody is going to wait for a record whose wait already returned.
    if (e.waited) entries_.erase(it);
    cv_.notify_all();
  }
}

Status TransferLedger::wait(uint64_t transfer_id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto idle = [&] {
    auto it = entries_.find(transfer_id);
    return it == entries_.end() || it->second.in_flight == 0;
  };
  const bool done = cv_.wait_for(lock, timeout, idle);
  auto it = entries_.find(transfer_id);
  if (it == entries_.end()) return Status::ok();
  Entry& e = it->second;
  Status result;
  if (e.failed > 0) {
    result = io_error("kv transfer {}: {} of {} messages failed; first error: {}", transfer_id,
                      e.failed, e.queued, e.first_error.message());
  } else if (!done) {
    result = io_error("kv transfer {}: {} of {} messages to {} not delivered after {} ms",
                      transfer_id, e.in_flight, e.queued, e.peer, timeout.count());
  }
  if (e.in_flight == 0) {
    entries_.erase(it);
  } else {
    e.waited = true;
  }
  return result;
}

size_t TransferLedger::transfers_tracked() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace deepinfer::transfer
