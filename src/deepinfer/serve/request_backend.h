// What the HTTP routes submit requests to: the in-process engine (EngineLoop, roles all,
// prefill and decode) or, for --role entrypoint, the prefill and decode engines of a
// disaggregated deployment (pd_entrypoint.h). Either way a request's outputs arrive, in order,
// on its own RequestStream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"
#include "deepinfer/serve/metrics.h"

namespace deepinfer::serve {

class RequestBackend;

// The error of the outputs that end running requests when the server stops (SIGTERM): streams
// end normally with what was generated. Any other error after the first token is a failure.
inline constexpr const char* kShuttingDown = "the server is shutting down";
// An output error that starts with this ends a request the server could not finish for want of
// a part of itself (an expert-parallel rank was lost): answered 503 (retry elsewhere), not 500.
inline constexpr const char* kServiceUnavailable = "service unavailable: ";

// The outputs of one request, in order, as the backend produces them. Thread-safe.
class RequestStream {
 public:
  enum class Next { kOutput, kTimeout, kClosed };
  // Waits up to `timeout` for the next output. kClosed: the final output was already read.
  Next next(engine::RequestOutput& out, std::chrono::milliseconds timeout);
  // Ends the request (client gone, or the caller lost interest); idempotent.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  int64_t request_id() const { return request_id_; }
  // Called by the backend: queues an output (ignored after the final one).
  void push(engine::RequestOutput out);

 private:
  friend class RequestBackend;
  RequestBackend* backend_ = nullptr;
  int64_t request_id_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<engine::RequestOutput> queue_;
  bool finished_pushed_ = false;  // the final output is queued (or was read)
  bool closed_ = false;           // the final output was read
  std::atomic<bool> cancelled_{false};
};

class RequestBackend {
 public:
  virtual ~RequestBackend() = default;
  // Queues a request; returns once it was accepted or refused (a bad request is
  // kInvalidArgument, a full queue or no live engine kResourceExhausted/kUnavailable).
  virtual Result<std::shared_ptr<RequestStream>> submit(const engine::GenerationRequest& request) = 0;
  // Stops accepting requests and ends those still running.
  virtual void shutdown() = 0;
  virtual const recipe::Tokenizer& tokenizer() const = 0;
  virtual const model::ModelConfig& model_config() const = 0;
  virtual ServerMetrics& metrics() = 0;
  virtual EngineGauges gauges() const = 0;

 protected:
  friend class RequestStream;
  // The stream's cancel(): end the request (its final output may still follow).
  virtual void request_abort(int64_t request_id) = 0;
  static std::shared_ptr<RequestStream> new_stream(RequestBackend* owner, int64_t request_id = 0) {
    auto s = std::make_shared<RequestStream>();
    s->backend_ = owner;
    s->request_id_ = request_id;
    return s;
  }
  static void set_request_id(RequestStream& s, int64_t id) { s.request_id_ = id; }
};

}  // namespace deepinfer::serve
