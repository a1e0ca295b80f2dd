#include "deepinfer/serve/metrics.h"

#include <fmt/format.h>

namespace deepinfer::serve {

void LatencyHistogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i] += 1;
  sum_ += seconds;
  count_ += 1;
}

void LatencyHistogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  cumulative += counts_[kBounds.size()];
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name,
                     sum_, name, count_);
}

void ServerMetrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{route, status}] += 1;
}

namespace {
void gauge(std::string& out, const char* name, const char* help, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
}
void counter(std::string& out, const char* name, const char* help, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
}
}  // namespace

namespace {

// A histogram over small integer values (drafts per sequence-step): bucket le=i counts <= i.
void count_histogram(std::string& out, const char* name, const char* help, const std::vector<int64_t>& by_value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cum = 0, sum = 0;
  for (size_t i = 0; i < by_value.size(); ++i) {
    cum += by_value[i];
    sum += by_value[i] * static_cast<int64_t>(i);
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, i, cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum, name, cum);
}

void render_speculative(const EngineGauges& g, std::string& out) {
  counter(out, "deepinfer_spec_steps_total", "Engine steps that verified drafts", double(g.spec_steps));
  counter(out, "deepinfer_spec_draft_tokens_total", "Draft tokens proposed by the drafter", double(g.spec_drafted));
  counter(out, "deepinfer_spec_verified_tokens_total", "Draft tokens verified by the target model",
          double(g.spec_verified));
  counter(out, "deepinfer_spec_accepted_tokens_total", "Draft tokens accepted (emitted)", double(g.spec_accepted));
  count_histogram(out, "deepinfer_spec_verified_per_step", "Drafts verified per sequence and step",
                  g.spec_verified_per_step);
  count_histogram(out, "deepinfer_spec_accepted_per_step", "Drafts accepted per sequence and step",
                  g.spec_accepted_per_step);
}

}  // namespace

std::string ServerMetrics::render(const EngineGauges& g, const std::string& model_name) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP deepinfer_requests_total HTTP requests by route and status code\n";
    out += "# TYPE deepinfer_requests_total counter\n";
    for (const auto& [key, n] : requests_)
      out += fmt::format("deepinfer_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                         key.second, n);
  }
  counter(out, "deepinfer_prompt_tokens_total", "Prompt tokens of finished requests",
          double(prompt_tokens_.load()));
  counter(out, "deepinfer_generation_tokens_total", "Generated tokens", double(generation_tokens_.load()));
  counter(out, "deepinfer_aborted_requests_total", "Requests ended early (client gone, shutdown)",
          double(aborted_.load()));
  gauge(out, "deepinfer_num_requests_waiting", "Requests queued in the engine", g.waiting);
  gauge(out, "deepinfer_num_requests_running", "Sequences in the running batch", g.running);
  gauge(out, "deepinfer_num_requests_in_flight", "Requests submitted and not finished", g.in_flight);
  gauge(out, "deepinfer_kv_cache_usage_ratio", "Share of KV blocks held by running sequences",
        g.kv_blocks ? double(g.kv_blocks_in_use) / double(g.kv_blocks) : 0.0);
  gauge(out, "deepinfer_kv_cache_blocks", "KV pool size in blocks", g.kv_blocks);
  if (g.kv_recent_slabs > 0) {
    gauge(out, "deepinfer_kv_recent_slabs", "Recent-row slabs (window and compressor tails)",
          g.kv_recent_slabs);
    gauge(out, "deepinfer_kv_recent_slabs_in_use", "Recent-row slabs pinned by running sequences",
          g.kv_recent_slabs_in_use);
    counter(out, "deepinfer_swa_replays_total",
            "Prefix hits whose sliding-window state was rebuilt by a bounded replay",
            double(g.swa_replays));
    counter(out, "deepinfer_swa_replayed_tokens_total",
            "Cached prompt tokens computed again by bounded replays", double(g.swa_replayed_tokens));
    counter(out, "deepinfer_swa_checkpoints_saved_total",
            "Sliding-window checkpoints (window rows and compressor tails at a prefix end) written "
            "to the KV store",
            double(g.swa_checkpoints_saved));
    counter(out, "deepinfer_swa_checkpoints_loaded_total",
            "KV store prefix hits restored exactly from a sliding-window checkpoint",
            double(g.swa_checkpoints_loaded));
    counter(out, "deepinfer_swa_checkpoint_queries_total",
            "Prefix ends the KV store was asked for a sliding-window checkpoint (a store lookup "
            "each; a hit asks from its longest prefix down)",
            double(g.swa_checkpoint_queries));
  }
  counter(out, "deepinfer_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
          double(g.prefix_lookup_tokens));
  counter(out, "deepinfer_prefix_cache_hits_total", "Prompt tokens served from the prefix cache",
          double(g.prefix_hit_tokens));
  gauge(out, "deepinfer_prefix_cache_hit_rate", "Share of looked-up prompt tokens served from cache",
        g.prefix_lookup_tokens ? double(g.prefix_hit_tokens) / double(g.prefix_lookup_tokens) : 0.0);
  counter(out, "deepinfer_kv_store_hit_tokens_total", "Prompt tokens whose KV came from the KV store tier",
          double(g.kv_store_hit_tokens));
  counter(out, "deepinfer_kv_store_loaded_blocks_total", "KV blocks loaded from the KV store",
          double(g.kv_store_loaded_blocks));
  counter(out, "deepinfer_kv_store_written_blocks_total", "KV blocks handed to the KV store",
          double(g.kv_store_written_blocks));
  if (g.kv_store) {
    counter(out, "deepinfer_kv_store_ssd_read_blocks_total", "KV blocks read from the SSD targets",
            double(g.kv_store_ssd_read_blocks));
    counter(out, "deepinfer_kv_store_write_dropped_total",
            "KV store SSD writes dropped because the write queue was full", double(g.kv_store_write_dropped));
    gauge(out, "deepinfer_kv_store_write_queue", "KV store SSD writes queued or in flight",
          double(g.kv_store_write_queue));
    gauge(out, "deepinfer_kv_store_ram_bytes", "Bytes held in the KV store's RAM tier",
          double(g.kv_store_ram_bytes));
    counter(out, "deepinfer_kv_store_corrupt_shards_total",
            "KV store shards that failed validation (treated as lost)", double(g.kv_store_corrupt_shards));
    counter(out, "deepinfer_kv_store_reconstructions_total", "KV store reads rebuilt from parity",
            double(g.kv_store_reconstructions));
    counter(out, "deepinfer_kv_store_swept_total", "KV store entries deleted by the sweeper",
            double(g.kv_store_swept));
    counter(out, "deepinfer_kv_store_repaired_total",
            "KV store degraded entries rewritten from parity in the background", double(g.kv_store_repaired));
    gauge(out, "deepinfer_kv_store_unusable_targets",
          "KV store targets unusable since start (missing, not creatable, read-only)",
          double(g.kv_store_unusable_targets));
    counter(out, "deepinfer_kv_store_write_failures_total",
            "KV store entries not stored (fewer than k shards could be written)",
            double(g.kv_store_write_failures));
    counter(out, "deepinfer_kv_store_shard_write_errors_total", "KV store shard writes that failed",
            double(g.kv_store_shard_write_errors));
  }
  counter(out, "deepinfer_kv_cache_evictions_total", "Cached KV blocks reclaimed for new use",
          double(g.kv_evictions));
  if (g.moe) {
    counter(out, "deepinfer_moe_routed_assignments_total", "Token-to-expert assignments (MoE layers)",
            double(g.moe_routed_assignments));
    gauge(out, "deepinfer_moe_max_layer_imbalance",
          "Busiest expert's tokens over the mean, in the least balanced MoE layer", g.moe_max_layer_imbalance);
  }
  counter(out, "deepinfer_engine_steps_total", "Engine steps run", double(g.steps));
  if (g.speculative) render_speculative(g, out);
  ttft_.render("deepinfer_time_to_first_token_seconds", "Time from arrival to the first token", out);
  inter_token_.render("deepinfer_inter_token_latency_seconds", "Time between consecutive tokens", out);
  e2e_.render("deepinfer_e2e_request_latency_seconds", "Time from arrival to the last token", out);
  out += fmt::format("# HELP deepinfer_model_info The served model\n# TYPE deepinfer_model_info gauge\n"
                     "deepinfer_model_info{{model=\"{}\"}} 1\n", model_name);
  return out;
}

}  // namespace deepinfer::serve
