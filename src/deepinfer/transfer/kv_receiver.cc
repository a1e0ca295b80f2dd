// KvReceiver: a progress thread that probes for tagged messages from any sender, receives each
// into a buffer of its probed size, and hands completed ones to the handler in probe order.
#include <atomic>
#include <deque>
#include <exception>
#include <thread>

#include "deepinfer/base/log.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/transfer/kv_transfer.h"
#include "deepinfer/transfer/ucp_worker.h"

namespace deepinfer::transfer {
namespace {

using namespace std::chrono_literals;

// Longest sleep with nothing being received: an arriving message or the destructor wakes the
// thread through the event fd; the bound only matters should a transport not signal it.
constexpr auto kIdleSleep = 10ms;
// Longest sleep with receives in progress.
constexpr auto kBusySleep = 1ms;
// How long the destructor lets cancelled receives finish before the worker goes away.
constexpr double kShutdownGraceSeconds = 1.0;

// One probed message, receiving or received. Lives until it is delivered (or the worker is
// destroyed), so UCX may write into `bytes` and the callback into `done`.
struct Incoming {
  uint64_t transfer_id = 0;
  std::vector<uint8_t> bytes;
  void* request = nullptr;  // while UCX holds it
  bool done = false;
  ucs_status_t status = UCS_OK;
};

void on_received(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
  auto* in = static_cast<Incoming*>(user_data);
  in->done = true;
  in->status = status;
  in->request = nullptr;
  ucp_request_free(request);
}

}  // namespace

struct KvReceiver::Impl {
  MessageHandler handler;
  std::unique_ptr<UcpWorker> worker;
  std::atomic<bool> stop{false};
  std::thread thread;
  std::deque<std::unique_ptr<Incoming>> pending;  // progress thread only; probe order
  std::atomic<uint64_t> messages{0}, bytes{0}, failures{0};

  ~Impl() {
    worker.reset();  // first: UCX may still point into buffers of receives it never finished
    pending.clear();
  }

  void run() {
    while (!stop.load(std::memory_order_acquire)) {
      bool busy = worker->progress();
      busy |= receive_probed();
      busy |= deliver_completed();
      worker->pace(busy, pending.empty() ? kIdleSleep : kBusySleep);
    }
    cancel_pending();
  }

  // Starts a receive for every message that has arrived (eager) or announced itself
  // (rendezvous); true when there was any.
  bool receive_probed() {
    bool any = false;
    ucp_tag_recv_info_t info{};
    while (ucp_tag_message_h msg = ucp_tag_probe_nb(worker->handle(), 0, 0, 1, &info)) {
      any = true;
      auto in = std::make_unique<Incoming>();
      in->transfer_id = info.sender_tag;
      in->bytes.resize(info.length);
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      param.cb.recv = on_received;
      param.user_data = in.get();
      ucs_status_ptr_t r =
          ucp_tag_msg_recv_nbx(worker->handle(), in->bytes.data(), info.length, msg, &param);
      if (r == nullptr) {
        in->done = true;
      } else if (UCS_PTR_IS_ERR(r)) {
        in->done = true;
        in->status = UCS_PTR_STATUS(r);
      } else {
        in->request = r;
      }
      pending.push_back(std::move(in));
    }
    return any;
  }

  // Hands finished receives to the handler, oldest first, stopping at the first unfinished one
  // so that a big rendezvous message is not overtaken by a later small one.
  bool deliver_completed() {
    bool any = false;
    while (!pending.empty() && pending.front()->done) {
      std::unique_ptr<Incoming> in = std::move(pending.front());
      pending.pop_front();
      any = true;
      if (in->status != UCS_OK) {
        failures.fetch_add(1, std::memory_order_relaxed);
        log::warn("kv transfer {}: receiving a {}-byte message failed: {}", in->transfer_id,
                  in->bytes.size(), ucs_error(in->status));
        continue;
      }
      messages.fetch_add(1, std::memory_order_relaxed);
      bytes.fetch_add(in->bytes.size(), std::memory_order_relaxed);
      try {
        handler(in->transfer_id, std::move(in->bytes));
      } catch (const std::exception& e) {
        log::error("kv transfer {}: the message handler threw: {}", in->transfer_id, e.what());
      }
    }
    return any;
  }

  void cancel_pending() {
    for (auto& in : pending)
      if (in->request) ucp_request_cancel(worker->handle(), in->request);
    const double deadline = now_seconds() + kShutdownGraceSeconds;
    auto unfinished = [&] {
      for (auto& in : pending)
        if (!in->done) return true;
      return false;
    };
    while (unfinished() && now_seconds() < deadline) worker->pace(worker->progress(), kBusySleep);
  }
};

Result<std::unique_ptr<KvReceiver>> KvReceiver::create(MessageHandler handler) {
  if (!handler) return invalid_argument("KvReceiver: the message handler is empty");
  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  DI_ASSIGN_OR_RETURN(impl->worker, UcpWorker::create("deepinfer-kv-receiver"));
  Impl* p = impl.get();
  impl->thread = std::thread([p] { p->run(); });
  return std::unique_ptr<KvReceiver>(new KvReceiver(std::move(impl)));
}

KvReceiver::KvReceiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvReceiver::~KvReceiver() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->worker->signal();
  impl_->thread.join();
}

const std::string& KvReceiver::address() const { return impl_->worker->address_hex(); }

KvReceiverStats KvReceiver::stats() const {
  KvReceiverStats s;
  s.messages = impl_->messages.load(std::memory_order_relaxed);
  s.bytes = impl_->bytes.load(std::memory_order_relaxed);
  s.failures = impl_->failures.load(std::memory_order_relaxed);
  return s;
}

}  // namespace deepinfer::transfer
