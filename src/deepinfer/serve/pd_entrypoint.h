// `serve --role entrypoint`: the public APIs (every route of the all-in-one server) over the
// prefill and decode pools of a disaggregated deployment (docs/pd.md). The routes turn each
// request into tokens exactly as before and submit it here; for each request this backend
//   1. picks a decode engine (not one whose KV cache is nearly full while another has room;
//      then fewest requests in flight, then the emptier KV cache) and a prefill engine (the one that
//      last computed the same prompt head, unless it is much busier; else the least queued
//      prompt tokens),
//   2. asks the prefill engine to compute the prompt and send its blocks to the decode engine
//      (POST /internal/v1/prefill); a prefill engine that fails is marked down and the prompt
//      goes to another (at most every engine once); a decode engine the blocks cannot reach is
//      marked down and another is picked,
//   3. streams the decode engine's outputs (POST /internal/v1/generate) to the route; a decode
//      engine that dies mid-stream ends the request with an error output, never a hang.
// With --kv-store (the engines' shared store), the entrypoint first looks up how much of the
// prompt the store holds (the engines' SHA-256 block chain, from their /internal/v1/info): a
// prompt whose every full block is stored skips the prefill pool (the decode engine, on the
// same store, reads the prefix itself and computes only the last partial block); otherwise the
// stored part is left out of the prefill engines' queued-token load.
// A health thread re-resolves the engine URLs and checks every engine every two seconds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "deepinfer/engine/loaded_model.h"
#include "deepinfer/kvstore/kv_store.h"
#include "deepinfer/serve/pd_engine_pool.h"
#include "deepinfer/serve/metrics.h"
#include "deepinfer/serve/request_backend.h"

namespace httplib {
class Client;
}

namespace deepinfer::serve {

struct EntrypointOptions {
  std::vector<std::string> prefill_urls;
  std::vector<std::string> decode_urls;
  std::vector<std::string> kv_store_dirs;  // the engines' shared KV store, for lookups
  int max_queued_requests = 1024;
  std::chrono::milliseconds health_interval{2000};
};

class DisaggregatedBackend : public RequestBackend {
 public:
  static Result<std::unique_ptr<DisaggregatedBackend>> create(engine::ModelRecipe recipe,
                                                              const EntrypointOptions& options);
  ~DisaggregatedBackend() override;

  Result<std::shared_ptr<RequestStream>> submit(const engine::GenerationRequest& request) override;
  void shutdown() override;
  const recipe::Tokenizer& tokenizer() const override { return *recipe_.tokenizer; }
  const model::ModelConfig& model_config() const override { return recipe_.config; }
  ServerMetrics& metrics() override { return metrics_; }
  EngineGauges gauges() const override;

  // /health: ready once a prefill and a decode engine answer.
  bool ready(std::string& why) const;
  std::string extra_metrics() const;

 protected:
  void request_abort(int64_t request_id) override {}  // the job sees stream->cancelled()

 private:
  DisaggregatedBackend() = default;
  struct Job;
  void run(const std::shared_ptr<Job>& job);
  void health_loop();
  // `store_id` not empty: only engines on that KV store.
  std::shared_ptr<RemoteEngine> pick_decode(const std::vector<std::string>& exclude,
                                            const std::string& store_id = "");
  std::shared_ptr<RemoteEngine> pick_prefill(const Job& job, const std::vector<std::string>& exclude);
  // The prefill step: blocks handed to `decode`, prefill's cached tokens; false = no prefill
  // engine could do it (the error is in `error`), or `decode` could not be reached
  // (decode_unreachable set).
  bool prefill(Job& job, const std::shared_ptr<RemoteEngine>& decode, uint64_t transfer_id, int& blocks,
               int& cached, bool& decode_unreachable, std::string& error);
  // Streams the decode engine's outputs to the job's stream; an engine that fails ends the
  // request with an error output (and is marked down).
  void decode(Job& job, const std::shared_ptr<RemoteEngine>& engine, uint64_t transfer_id, int blocks, int cached);
  void finish_with_error(Job& job, const std::string& error);
  // Tokens of the prompt's head whose blocks the shared store holds (0 without a store or
  // before an engine told the block keys' namespace).
  int stored_prefix_tokens(const std::vector<int32_t>& prompt);
  // After each health check: the namespace and block size of the store's keys.
  void update_lookup_keys();
  // An HTTP call to an engine the job makes; shutdown stops those still running.
  void track(httplib::Client* client, bool add);

  engine::ModelRecipe recipe_;
  EntrypointOptions options_;
  std::unique_ptr<EnginePool> prefill_pool_, decode_pool_;
  ServerMetrics metrics_;
  std::string kv_namespace_;  // health thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_requested_{false};  // jobs drop their engine connections
  int active_ = 0;  // jobs whose thread runs
  std::atomic<int64_t> next_id_{1};
  std::atomic<uint64_t> prefill_retries_{0}, decode_failures_{0}, refused_{0};
  // The entrypoint's KV store lookups (with --kv-store).
  std::unique_ptr<kvstore::KvStore> store_;
  std::string store_id_;
  bool lookup_ready_ = false;  // guarded by mu_, with the two below
  kvstore::BlockKey lookup_root_{};
  int lookup_block_tokens_ = 0;
  std::atomic<uint64_t> store_lookups_{0}, store_hit_tokens_{0}, prefill_skipped_{0};
  // Per pool, as the entrypoint sees it: the prefill call (queue, compute, transfer), then the
  // decode engine's first token after it was asked, and the time per output token after that.
  LatencyHistogram prefill_seconds_, decode_first_token_seconds_, decode_tpot_seconds_;
  std::vector<httplib::Client*> clients_;  // guarded by mu_
  // Prompt head -> the prefill engine that last computed it (cache affinity).
  std::unordered_map<uint64_t, std::string> affinity_;
  std::thread health_;
};

}  // namespace deepinfer::serve
