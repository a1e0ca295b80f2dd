// The entrypoint's view of one pool (prefill or decode) of a disaggregated deployment: the
// engines named by --prefill / --decode URLs, each URL's host resolved to every address it has
// (a Kubernetes headless Service names all its pods), health-checked every few seconds through
// GET /internal/v1/info, with the load counters the balancers read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::serve {

struct RemoteEngine {
  std::string address;  // "ip:port", the engine's identity in the pool
  std::string host;     // ip
  int port = 0;
  std::atomic<bool> healthy{false};
  std::atomic<int> in_flight{0};                 // requests it is working on for us
  std::atomic<int64_t> queued_prompt_tokens{0};  // prefill: prompt tokens it is computing for us
  std::atomic<uint64_t> requests{0}, failures{0};
  // From its info (guarded by the pool's mutex).
  std::string kv_address, kv_namespace, down_reason;
  int kv_block_tokens = 0;
  std::string kv_store_id;  // "" when the engine has no shared KV store
  // Its load at the last health check (every few seconds).
  std::atomic<double> kv_cache_usage{0};  // KV blocks held by running sequences / all
  std::atomic<int> running{0};            // sequences in its batch (ours and others')
};

struct EngineUrl {
  std::string host;
  int port = 0;
};
// "http://host:port[/]" (the scheme may be left out; the port is required).
Result<EngineUrl> parse_engine_url(const std::string& url);

// The decode balancer: an engine whose KV cache is nearly full (>= kKvUsageFull held by
// running sequences) would preempt or queue the request, so it is avoided while another has
// room; then the fewest requests in flight (this entrypoint's, counted live), then the emptier
// KV cache (as its last health check said: other entrypoints' requests count there). Null
// when `candidates` is empty.
inline constexpr double kKvUsageFull = 0.9;
std::shared_ptr<RemoteEngine> least_loaded_decode(const std::vector<std::shared_ptr<RemoteEngine>>& candidates);

class EnginePool;
// Prometheus text of the pools' engines: health, in-flight requests, queued prompt tokens,
// requests and failures, one family at a time (HELP and TYPE included).
std::string pool_metrics_text(const std::vector<const EnginePool*>& pools);

class EnginePool {
 public:
  // `role`: "prefill" or "decode" (what each engine's info must say).
  static Result<std::unique_ptr<EnginePool>> create(std::string role, const std::vector<std::string>& urls);

  // Resolves every URL again and checks every engine (the entrypoint's health thread).
  // `kv_namespace`: the namespace engines must share ("" = adopt the first one seen).
  void refresh(std::string& kv_namespace);
  std::vector<std::shared_ptr<RemoteEngine>> healthy() const;
  size_t size() const;
  // A request failed to reach it: down until the next refresh finds it answering.
  void mark_down(const std::shared_ptr<RemoteEngine>& e, const std::string& why);
  std::string kv_address(const RemoteEngine& e) const;
  // The engine's shared store id ("" = none), under the pool's lock.
  std::string kv_store_id(const RemoteEngine& e) const;
  const std::string& role() const { return role_; }
  // "prefill: 2 of 2 engines healthy" and the reasons of those down.
  std::string describe() const;

 private:
  EnginePool() = default;
  friend std::string pool_metrics_text(const std::vector<const EnginePool*>& pools);
  std::string role_;
  std::vector<EngineUrl> urls_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<RemoteEngine>> engines_;
};

}  // namespace deepinfer::serve
