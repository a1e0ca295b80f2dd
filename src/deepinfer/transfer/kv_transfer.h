// The KV transfer transport: a prefill engine sends KV blocks (opaque byte messages) to decode
// engines in other processes over UCX. docs/kv_transfer.md has the figures and the details.
//
// Message flow
//   decode process                                 prefill process
//   KvReceiver::create(handler)                    KvSender::create()
//     UCP context + worker, progress thread          UCP context + worker, progress thread
//   address() -> hex of the worker address  --(control plane, e.g. JSON)-->  peer_address
//                                                  send(peer_address, transfer_id, message)
//                                                    queues; the sender thread connects on
//                                                    first use (ucp_ep_create, error mode
//                                                    PEER) and reuses the endpoint
//                                                    ucp_tag_send_sync_nbx(tag = transfer_id)
//   receiver thread: ucp_tag_probe_nb (any tag)  <-- eager (small) or rendezvous (big: the
//     -> buffer of the probed length                receiver pulls the sender's buffer)
//     -> ucp_tag_msg_recv_nbx; completed receives are handed to `handler(tag, bytes)` in probe
//        order, so one sender's messages arrive in the order it sent them
//   the match is acknowledged to the sender   -->  the send completes: "delivered"
//                                                  flush(transfer_id, timeout) returns once
//                                                  every message of that transfer completed
// The bytes the handler sees are exactly the bytes passed to send(): the transfer id travels in
// the UCX tag, nothing is prepended.
//
// Failure: endpoints use UCP_ERR_HANDLING_MODE_PEER. A peer process that dies fails its endpoint
// (over TCP at once; over shared memory when keepalive finds the process gone, within about a
// second); every message in flight to it completes with that error, the endpoint is closed, and
// later sends to the same address fail at once. flush() names the transfer, the peer and the
// error, or says how many messages were still undelivered when its timeout ran out (the only
// signal when a receiver is destroyed inside a process that lives on and the link is shared
// memory). Nothing here waits without a bound: destructors give messages in flight a short grace
// time, then force-close endpoints.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::transfer {

// UCX transports when UCX_TLS is not set: TCP (loopback within a host, the network across
// hosts) and `self` within one process. Not shared memory by default: a sender killed in the
// middle of writing into a receiver's shared-memory FIFO can leave that FIFO stuck, and the
// receiver (a decode engine) then never hears from any sender again (seen here about once in 30
// kills under load; never over TCP). UCX_TLS overrides it (e.g. "sm,tcp,self" for speed on one
// host, or RDMA transports across hosts), as do the other UCX_* variables.
inline constexpr const char* kDefaultUcxTransports = "tcp,self";

// One received message: which transfer it belongs to, and its bytes (as the sender passed them).
// Called on the receiver's progress thread; it must not throw and should return quickly (hand
// the bytes to another thread if there is real work to do), since it holds up later messages.
using MessageHandler = std::function<void(uint64_t transfer_id, std::vector<uint8_t> message)>;

struct KvReceiverStats {
  uint64_t messages = 0;  // handed to the handler
  uint64_t bytes = 0;
  uint64_t failures = 0;  // receives that ended in an error (the sender died mid-message)
};

struct KvSenderStats {
  uint64_t messages = 0;       // delivered (matched by the receiver)
  uint64_t bytes = 0;          // of delivered messages
  uint64_t failures = 0;       // messages that failed (peer gone, bad address, sender shut down)
  double seconds_sending = 0;  // wall time with at least one message in flight
};

class KvReceiver {  // in the decode engine
 public:
  // Creates a UCP context + worker and a progress thread; every message received calls
  // `handler` on that thread (in arrival order per sender).
  static Result<std::unique_ptr<KvReceiver>> create(MessageHandler handler);
  ~KvReceiver();  // stops the thread, closes everything; never hangs
  KvReceiver(const KvReceiver&) = delete;
  KvReceiver& operator=(const KvReceiver&) = delete;

  // The worker's address, hex-encoded (goes into a control message to the sender).
  const std::string& address() const;
  KvReceiverStats stats() const;

  struct Impl;

 private:
  explicit KvReceiver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class KvSender {  // in the prefill engine; one per process, many peers
 public:
  static Result<std::unique_ptr<KvSender>> create();
  ~KvSender();  // fails what is still in flight (flush callers get an error), never hangs
  KvSender(const KvSender&) = delete;
  KvSender& operator=(const KvSender&) = delete;

  // Queues one message for the peer whose address (hex, from KvReceiver::address) is given;
  // connects on first use and reuses the endpoint. Never blocks on the network. A bad address
  // or a dead peer fails the message; flush() reports it.
  void send(const std::string& peer_address, uint64_t transfer_id, std::vector<uint8_t> message);
  // Waits until every message queued for `transfer_id` has been delivered (matched by the
  // receiver: synchronous-send mode) or failed, at most `timeout`. OK, or an error naming the
  // transfer, the peer and the problem. A transfer with nothing queued is OK. After an error
  // the transfer is abandoned: messages still in flight finish in the background and show only
  // in stats(). Use a fresh transfer id for each transfer (ids are not meant to be reused).
  Status flush(uint64_t transfer_id, std::chrono::milliseconds timeout);
  KvSenderStats stats() const;

  struct Impl;

 private:
  explicit KvSender(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::transfer
