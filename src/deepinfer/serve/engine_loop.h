// The engine behind the HTTP server: one thread owns the Engine and steps it; handler threads
// submit requests and read each request's outputs from its own stream. Engine calls never
// cross threads, so the engine itself stays single-threaded.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/serve/metrics.h"

namespace deepinfer::serve {

class EngineLoop;

// The outputs of one request, in order, as the engine produces them. Thread-safe.
class RequestStream {
 public:
  enum class Next { kOutput, kTimeout, kClosed };
  // Waits up to `timeout` for the next output. kClosed: the final output was already read.
  Next next(engine::RequestOutput& out, std::chrono::milliseconds timeout);
  // Ends the request (client gone, or the caller lost interest); idempotent.
  void cancel();
  int64_t request_id() const { return request_id_; }

 private:
  friend class EngineLoop;
  void push(engine::RequestOutput out);

  EngineLoop* loop_ = nullptr;
  int64_t request_id_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<engine::RequestOutput> queue_;
  bool finished_pushed_ = false;  // the final output is queued (or was read)
  bool closed_ = false;           // the final output was read
  std::atomic<bool> cancelled_{false};
};

struct EngineLoopOptions {
  int max_queued_requests = 1024;  // beyond this, submit() answers kResourceExhausted
};

class EngineLoop {
 public:
  EngineLoop(std::unique_ptr<engine::Engine> engine, const EngineLoopOptions& options);
  ~EngineLoop();  // shutdown(), then joins

  // Queues a request; returns once the engine accepted or refused it (a bad request is
  // kInvalidArgument with the engine's message, a full queue kResourceExhausted).
  Result<std::shared_ptr<RequestStream>> submit(const engine::GenerationRequest& request);
  // Stops accepting requests, aborts those still running and ends the thread.
  void shutdown();

  const recipe::Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  const model::ModelConfig& model_config() const { return engine_->model_config(); }
  ServerMetrics& metrics() { return metrics_; }
  // Queue length, running sequences and KV counters, read on the engine thread after each step.
  EngineGauges gauges() const;

 private:
  friend class RequestStream;
  struct Submission {
    engine::GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    std::promise<Status>* accepted = nullptr;
  };
  void run();
  void request_abort(int64_t request_id);
  void drain_commands();
  void dispatch(std::vector<engine::RequestOutput>& outputs);
  void abort_all(const std::string& reason);
  void update_gauges();  // engine thread

  std::unique_ptr<engine::Engine> engine_;
  EngineLoopOptions options_;
  ServerMetrics metrics_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::vector<Submission> submissions_;
  std::vector<int64_t> aborts_;
  bool stopping_ = false;
  int queued_ = 0;  // submitted, not yet finished
  EngineGauges gauges_;

  // Engine thread only.
  struct Live {
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point submitted, last_token;
    bool got_first_token = false;
  };
  std::map<int64_t, Live> live_;
  std::chrono::steady_clock::time_point experts_refreshed_{};
  std::thread thread_;
};

}  // namespace deepinfer::serve
