#include "deepinfer/serve/request_backend.h"

namespace deepinfer::serve {

RequestStream::Next RequestStream::next(engine::RequestOutput& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || closed_; })) return Next::kTimeout;
  if (queue_.empty()) return Next::kClosed;
  out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) closed_ = true;
  return Next::kOutput;
}

void RequestStream::push(engine::RequestOutput out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_pushed_) return;
    if (out.finished) finished_pushed_ = true;
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

void RequestStream::cancel() {
  if (cancelled_.exchange(true)) return;
  if (backend_) backend_->request_abort(request_id_);
}

}  // namespace deepinfer::serve
