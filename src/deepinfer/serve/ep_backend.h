// The backend of `serve --ep N` on rank 0 (docs/parallel.md): the HTTP routes submit here; a
// loop thread assigns each request to the rank with the fewest in flight and drives the
// collective step of every rank (ep_rank.h), delivering the gathered outputs to the request
// streams. When all ranks are idle it waits for work without touching MPI, and the other ranks
// wait in a sleeping poll. When a rank is lost (EpLiveness), every request ends with an error,
// new ones get 503 and ready() says why; the loop thread may be stuck in a collective with the
// dead rank then, so it is left behind, never joined.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/rebalancer.h"
#include "deepinfer/serve/ep_load.h"
#include "deepinfer/serve/ep_rank.h"
#include "deepinfer/serve/request_backend.h"

namespace deepinfer::parallel {
class EpLiveness;
}

namespace deepinfer::serve {

class EpBackend : public RequestBackend {
 public:
  // `liveness` (may be null) is told when a clean stop begins.
  // `rebalance`: live EPLB (interval 0 = the placement stays as it is; the load window and its
  // metrics are kept either way).
  EpBackend(std::unique_ptr<engine::Engine> engine, parallel::EpGroup& group, parallel::EpLiveness* liveness,
            int max_queued_requests, const parallel::RebalanceOptions& rebalance);
  ~EpBackend();

  Result<std::shared_ptr<RequestStream>> submit(const engine::GenerationRequest& request) override;
  void shutdown() override;
  const recipe::Tokenizer& tokenizer() const override { return engine_->tokenizer(); }
  const model::ModelConfig& model_config() const override { return engine_->model_config(); }
  ServerMetrics& metrics() override { return metrics_; }
  EngineGauges gauges() const override;

  // A rank is gone: end every request with an error, refuse new ones from now on.
  void rank_lost(int rank, const std::string& why);
  // /health: false (with the reason) once a rank was lost.
  bool ready(std::string& why) const;
  bool failed() const;
  std::string extra_metrics() const;

 private:
  struct Waiter {
    std::shared_ptr<RequestStream> stream;
    std::promise<Status>* accepted = nullptr;
    int rank = 0;
  };
  struct Live {
    std::shared_ptr<RequestStream> stream;
    int rank = 0;
    std::chrono::steady_clock::time_point submitted, last_token;
    bool got_first_token = false;
  };
  void run();
  void request_abort(int64_t request_id) override;
  bool take_control(ep::Control& c);  // false: a rank was lost
  void handle(const std::vector<ep::RankReport>& reports);
  void observe_rebalance(const std::vector<ep::RankReport>& reports);
  void deliver(engine::RequestOutput& out);  // mu_ held
  void end_all(const std::string& reason, StatusCode code);  // mu_ held
  void forget(int rank);  // mu_ held: one request of `rank` is no longer in flight

  std::unique_ptr<engine::Engine> engine_;
  parallel::EpGroup& group_;
  parallel::EpLiveness* liveness_;
  ep::EpRank rank_;
  int max_queued_;
  ServerMetrics metrics_;
  ep::EpLoad load_;
  parallel::Rebalancer rebalancer_;  // loop thread, and /metrics (it locks itself)
  int64_t logged_rebalances_ = 0, logged_failures_ = 0;  // loop thread

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  int64_t next_id_ = 1;
  std::vector<ep::Assignment> pending_;  // submitted, not yet broadcast
  std::map<int64_t, Waiter> waiting_;    // submitted, not yet accepted by its rank
  std::map<int64_t, Live> live_;         // accepted, not finished
  std::vector<int64_t> aborts_;
  std::vector<int> in_flight_;           // per rank
  int queued_ = 0;
  bool stopping_ = false;
  std::string failure_;  // non-empty once a rank was lost
  EngineGauges gauges_;
  std::atomic<bool> loop_done_{false};
  std::thread thread_;
};

}  // namespace deepinfer::serve
