// Server metrics in Prometheus' text format: request counts by route and status, TTFT and
// inter-token latency histograms, token counters, and gauges read from the engine.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::serve {

// Fixed-bucket histogram (seconds); observe() is thread-safe.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,  30};
  void observe(double seconds);
  // Appends "# TYPE" and the _bucket/_sum/_count lines for `name`.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBounds.size() + 1> counts_{};  // last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Engine state, copied out of the engine thread after each step.
struct EngineGauges {
  int waiting = 0;           // queued in the engine, not yet scheduled
  int running = 0;           // sequences in the running batch
  int in_flight = 0;         // submitted to the server and not finished
  int64_t prefix_lookup_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;     // of those, served from cache (memory or KV store)
  int64_t kv_store_hit_tokens = 0;   // of those, loaded from the KV store tier
  int64_t kv_store_loaded_blocks = 0;
  int64_t kv_store_written_blocks = 0;
  int64_t kv_evictions = 0;          // cached blocks reclaimed for new use
  // The KV store's own tiers (with --kv-store; refreshed at most once a second).
  bool kv_store = false;
  uint64_t kv_store_ssd_read_blocks = 0;   // blocks read from the SSD targets
  uint64_t kv_store_write_dropped = 0;     // SSD writes dropped because the queue was full
  uint64_t kv_store_write_queue = 0;       // SSD writes queued or in flight now
  uint64_t kv_store_ram_bytes = 0;         // bytes in the store's RAM tier
  uint64_t kv_store_corrupt_shards = 0;    // shards that failed their checksum (treated as lost)
  uint64_t kv_store_reconstructions = 0;   // reads rebuilt from parity
  uint64_t kv_store_swept = 0;             // entries deleted by the sweeper (expired or evicted)
  uint64_t kv_store_repaired = 0;          // degraded entries rewritten in the background
  uint64_t kv_store_unusable_targets = 0;  // targets unusable since start (missing, read-only)
  uint64_t kv_store_write_failures = 0;    // entries not stored (fewer than k shards written)
  uint64_t kv_store_shard_write_errors = 0;
  int64_t steps = 0;
  int kv_blocks = 0;            // KV pool size in blocks
  int kv_blocks_in_use = 0;     // held by running sequences (not reclaimable now)
  int kv_recent_slabs = 0;         // hybrid caches (DeepSeek-V4): recent-row slabs in all
  int kv_recent_slabs_in_use = 0;  // pinned by running sequences
  int64_t swa_replays = 0;          // prefix hits restored by a bounded replay (swa_restore)
  int64_t swa_replayed_tokens = 0;  // tokens those replays computed again
  int64_t swa_checkpoints_saved = 0;   // window checkpoints written to the KV store
  int64_t swa_checkpoints_loaded = 0;  // store hits restored exactly from one
  int64_t swa_checkpoint_queries = 0;  // prefix ends the KV store was asked for one
  // MoE models (expert load balancing input): expert assignments so far, and the worst layer's
  // busiest-expert load over the mean load (1 = perfectly balanced). Absent for dense models.
  bool moe = false;
  uint64_t moe_routed_assignments = 0;
  double moe_max_layer_imbalance = 0;
  // Speculative decoding (with --speculative): counters since start and, per verifying
  // sequence-step, how many drafts it verified and accepted ([0..16]).
  bool speculative = false;
  int64_t spec_steps = 0, spec_drafted = 0, spec_verified = 0, spec_accepted = 0;
  std::vector<int64_t> spec_verified_per_step, spec_accepted_per_step;
};

class ServerMetrics {
 public:
  void count_request(const std::string& route, int status);
  void add_prompt_tokens(int64_t n) { prompt_tokens_ += n; }
  void add_generation_tokens(int64_t n) { generation_tokens_ += n; }
  void count_abort() { aborted_ += 1; }
  LatencyHistogram& ttft() { return ttft_; }
  LatencyHistogram& inter_token() { return inter_token_; }
  LatencyHistogram& e2e() { return e2e_; }

  std::string render(const EngineGauges& gauges, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<int64_t> prompt_tokens_{0}, generation_tokens_{0}, aborted_{0};
  LatencyHistogram ttft_, inter_token_, e2e_;
};

}  // namespace deepinfer::serve
