// KvSender: callers queue messages; one progress thread owns the UCP worker, connects to peers
// on first use, posts synchronous tagged sends and reports each message's end to the ledger
// that flush() waits on.
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "deepinfer/base/timer.h"
#include "deepinfer/transfer/address.h"
#include "deepinfer/transfer/kv_transfer.h"
#include "deepinfer/transfer/transfer_ledger.h"
#include "deepinfer/transfer/ucp_worker.h"

namespace deepinfer::transfer {
namespace {

using namespace std::chrono_literals;

// Longest sleep with nothing in flight; send() and the destructor wake the thread at once.
constexpr auto kIdleSleep = 100ms;
// Longest sleep with messages in flight, should a completion not wake the event fd.
constexpr auto kBusySleep = 1ms;
// How long the destructor lets messages in flight finish before failing them.
constexpr double kShutdownGraceSeconds = 1.0;

struct Outgoing {
  std::string peer_address;
  uint64_t transfer_id = 0;
  std::vector<uint8_t> bytes;
};

// One remote receiver. After its endpoint fails, `error` stays set: the address belongs to a
// worker that is gone, and later messages to it fail at once.
struct Peer {
  std::string label;
  ucp_ep_h ep = nullptr;
  Status error;
  int in_flight = 0;  // posted sends not finished
};

// One posted send; owns the bytes until UCX is done with them.
struct InFlight {
  KvSender::Impl* impl = nullptr;
  Peer* peer = nullptr;
  uint64_t transfer_id = 0;
  std::vector<uint8_t> bytes;
};

void on_sent(void* request, ucs_status_t status, void* user_data);

void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->error.is_ok())
    peer->error = io_error("{}: connection failed: {}", peer->label, ucs_error(status));
}

}  // namespace

struct KvSender::Impl {
  std::unique_ptr<UcpWorker> worker;
  TransferLedger ledger;
  std::mutex queue_mu;
  std::vector<Outgoing> queue;  // guarded by queue_mu
  std::atomic<bool> stop{false};
  std::thread thread;

  // Progress thread only.
  std::unordered_map<std::string, std::unique_ptr<Peer>> peers;  // by hex address
  std::unordered_map<InFlight*, std::unique_ptr<InFlight>> in_flight;
  std::vector<void*> closing;  // ucp_ep_close_nbx requests not yet finished
  double busy_since = 0;

  mutable std::mutex stats_mu;
  KvSenderStats stats;  // guarded by stats_mu

  ~Impl() {
    worker.reset();  // first: UCX may still point into buffers of sends it never finished
    in_flight.clear();
  }

  void run() {
    while (!stop.load(std::memory_order_acquire)) {
      bool busy = post_queued();
      busy |= worker->progress();
      busy |= close_failed_endpoints();
      worker->pace(busy, in_flight.empty() ? kIdleSleep : kBusySleep);
    }
    shut_down();
  }

  bool post_queued() {
    std::vector<Outgoing> batch;
    {
      std::lock_guard lock(queue_mu);
      batch.swap(queue);
    }
    for (Outgoing& m : batch) post(m);
    return !batch.empty();
  }

  Peer& peer_for(const std::string& address) {
    std::unique_ptr<Peer>& slot = peers[address];
    if (slot) return *slot;
    slot = std::make_unique<Peer>();
    slot->label = peer_label(address);
    auto raw = hex_decode(address);
    if (!raw.is_ok()) {
      slot->error = invalid_argument("{}: {}", slot->label, raw.status().message());
      return *slot;
    }
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(raw->data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = on_endpoint_error;
    params.err_handler.arg = slot.get();
    ucs_status_t st = ucp_ep_create(worker->handle(), &params, &slot->ep);
    if (st != UCS_OK) {
      slot->ep = nullptr;
      slot->error = io_error("{}: connecting failed: {}", slot->label, ucs_error(st));
    }
    return *slot;
  }

  void post(Outgoing& m) {
    Peer& peer = peer_for(m.peer_address);
    if (!peer.error.is_ok()) {
      finish(m.transfer_id, m.bytes.size(), peer.error);
      return;
    }
    auto owned = std::make_unique<InFlight>();
    InFlight* f = owned.get();
    f->impl = this;
    f->peer = &peer;
    f->transfer_id = m.transfer_id;
    f->bytes = std::move(m.bytes);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = on_sent;
    param.user_data = f;
    // Synchronous mode: the send completes once the receiver has matched the message, so a
    // finished flush means the decode side has it, not merely that our buffer is free.
    ucs_status_ptr_t r =
        ucp_tag_send_sync_nbx(peer.ep, f->bytes.data(), f->bytes.size(), m.transfer_id, &param);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
      const ucs_status_t st = r == nullptr ? UCS_OK : UCS_PTR_STATUS(r);
      finish(m.transfer_id, f->bytes.size(), send_status(peer, st));
      return;
    }
    if (in_flight.empty()) busy_since = now_seconds();
    in_flight.emplace(f, std::move(owned));
    peer.in_flight++;
  }

  static Status send_status(const Peer& peer, ucs_status_t st) {
    if (st == UCS_OK) return Status::ok();
    if (!peer.error.is_ok()) return peer.error;  // the endpoint's failure says more
    return io_error("{}: send failed: {}", peer.label, ucs_error(st));
  }

  // A posted send ended (UCX callback, or the destructor giving up on it).
  void sent(InFlight* f, ucs_status_t st) {
    const uint64_t transfer_id = f->transfer_id;
    const size_t size = f->bytes.size();
    const Status status = send_status(*f->peer, st);
    f->peer->in_flight--;
    in_flight.erase(f);  // frees f
    if (in_flight.empty()) {
      std::lock_guard lock(stats_mu);
      stats.seconds_sending += now_seconds() - busy_since;
    }
    // Last: a flush waiting on this transfer may return and read stats() at once.
    finish(transfer_id, size, status);
  }

  void finish(uint64_t transfer_id, size_t size, const Status& st) {
    {
      std::lock_guard lock(stats_mu);
      if (st.is_ok()) {
        stats.messages++;
        stats.bytes += size;
      } else {
        stats.failures++;
      }
    }
    ledger.finish(transfer_id, st);
  }

  // Endpoints whose peer failed are closed at once (FORCE: nothing is left to flush); their
  // sends in flight complete with the error.
  bool close_failed_endpoints() {
    bool any = false;
    for (auto& [address, peer] : peers) {
      if (peer->ep == nullptr || peer->error.is_ok()) continue;
      close_endpoint(*peer, UCP_EP_CLOSE_FLAG_FORCE);
      any = true;
    }
    std::erase_if(closing, [](void* req) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
      ucp_request_free(req);
      return true;
    });
    return any;
  }

  void close_endpoint(Peer& peer, uint32_t flags) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = flags;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
    peer.ep = nullptr;
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
  }

  // Queued messages fail; messages in flight get the grace time to finish; then endpoints
  // close, gracefully where nothing is outstanding and by force (failing what is) elsewhere.
  void shut_down() {
    std::vector<Outgoing> left;
    {
      std::lock_guard lock(queue_mu);
      left.swap(queue);
    }
    const Status gone = io_error("the KV sender shut down before the message was sent");
    for (Outgoing& m : left) finish(m.transfer_id, m.bytes.size(), gone);
    double deadline = now_seconds() + kShutdownGraceSeconds;
    while (!in_flight.empty() && now_seconds() < deadline) {
      const bool progressed = worker->progress();
      worker->pace(close_failed_endpoints() || progressed, kBusySleep);
    }
    for (auto& [address, peer] : peers)
      if (peer->ep)
        close_endpoint(*peer,
                       peer->in_flight == 0 && peer->error.is_ok() ? 0 : UCP_EP_CLOSE_FLAG_FORCE);
    deadline = now_seconds() + kShutdownGraceSeconds;
    while ((!in_flight.empty() || !closing.empty()) && now_seconds() < deadline) {
      const bool progressed = worker->progress();
      worker->pace(close_failed_endpoints() || progressed, kBusySleep);
    }
    while (!in_flight.empty()) {
      InFlight* f = in_flight.begin()->first;
      finish(f->transfer_id, f->bytes.size(), gone);
      // The buffer stays owned until the worker is destroyed (~Impl).
      leaked.push_back(std::move(in_flight.begin()->second));
      in_flight.erase(in_flight.begin());
    }
  }
  std::vector<std::unique_ptr<InFlight>> leaked;  // sends UCX never finished; freed in ~Impl
};

namespace {

void on_sent(void* request, ucs_status_t status, void* user_data) {
  auto* f = static_cast<InFlight*>(user_data);
  ucp_request_free(request);
  f->impl->sent(f, status);
}

}  // namespace

Result<std::unique_ptr<KvSender>> KvSender::create() {
  auto impl = std::make_unique<Impl>();
  DI_ASSIGN_OR_RETURN(impl->worker, UcpWorker::create("deepinfer-kv-sender"));
  Impl* p = impl.get();
  impl->thread = std::thread([p] { p->run(); });
  return std::unique_ptr<KvSender>(new KvSender(std::move(impl)));
}

KvSender::KvSender(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvSender::~KvSender() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->worker->signal();
  impl_->thread.join();
}

void KvSender::send(const std::string& peer_address, uint64_t transfer_id,
                    std::vector<uint8_t> message) {
  impl_->ledger.add(transfer_id, peer_label(peer_address));
  {
    std::lock_guard lock(impl_->queue_mu);
    impl_->queue.push_back(Outgoing{peer_address, transfer_id, std::move(message)});
  }
  impl_->worker->signal();
}

Status KvSender::flush(uint64_t transfer_id, std::chrono::milliseconds timeout) {
  return impl_->ledger.wait(transfer_id, timeout);
}

KvSenderStats KvSender::stats() const {
  std::lock_guard lock(impl_->stats_mu);
  KvSenderStats s = impl_->stats;
  return s;
}

}  // namespace deepinfer::transfer
