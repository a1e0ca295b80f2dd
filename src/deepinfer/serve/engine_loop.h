// The engine behind the HTTP server (roles all, prefill, decode): one thread owns the Engine and
// steps it; handler threads submit requests and read each request's outputs from its own stream. Engine calls never
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
#include "deepinfer/serve/request_backend.h"

namespace deepinfer::serve {

struct EngineLoopOptions {
  int max_queued_requests = 1024;  // beyond this, submit() answers kResourceExhausted
};

class EngineLoop : public RequestBackend {
 public:
  EngineLoop(std::unique_ptr<engine::Engine> engine, const EngineLoopOptions& options);
  ~EngineLoop();  // shutdown(), then joins

  // Queues a request; returns once the engine accepted or refused it (a bad request is
  // kInvalidArgument with the engine's message, a full queue kResourceExhausted).
  Result<std::shared_ptr<RequestStream>> submit(const engine::GenerationRequest& request) override;
  // Stops accepting requests, aborts those still running and ends the thread.
  void shutdown() override;

  const recipe::Tokenizer& tokenizer() const override { return engine_->tokenizer(); }
  const model::ModelConfig& model_config() const override { return engine_->model_config(); }
  ServerMetrics& metrics() override { return metrics_; }
  // Queue length, running sequences and KV counters, read on the engine thread after each step.
  EngineGauges gauges() const override;

 private:
  struct Submission {
    engine::GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    std::promise<Status>* accepted = nullptr;
  };
  void run();
  void request_abort(int64_t request_id) override;
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
    // The counts of the outputs so far, so a request ended here (abort, stop) reports its
    // usage: the engine's own final output never comes for it.
    int prompt_tokens = 0, cached_tokens = 0, replayed_tokens = 0, completion_tokens = 0;
  };
  // The final output of a request ended by the loop (cancelled, or the server's stop).
  static engine::RequestOutput ended_output(int64_t id, const Live& live, const std::string& reason);
  std::map<int64_t, Live> live_;
  std::chrono::steady_clock::time_point experts_refreshed_{};
  std::thread thread_;
};

}  // namespace deepinfer::serve
