#include "deepinfer/serve/engine_loop.h"

#include <algorithm>
#include <optional>

#include "deepinfer/base/log.h"

namespace deepinfer::serve {

using Clock = std::chrono::steady_clock;

EngineLoop::EngineLoop(std::unique_ptr<engine::Engine> engine, const EngineLoopOptions& options)
    : engine_(std::move(engine)), options_(options) {
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(); }

Result<std::shared_ptr<RequestStream>> EngineLoop::submit(const engine::GenerationRequest& request) {
  std::promise<Status> accepted;
  std::future<Status> result = accepted.get_future();
  auto stream = new_stream(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return resource_exhausted("the server is shutting down");
    if (queued_ >= options_.max_queued_requests)
      return resource_exhausted("the server's request queue is full ({} requests); retry later",
                                options_.max_queued_requests);
    queued_ += 1;
    submissions_.push_back(Submission{request, stream, &accepted});
  }
  cv_.notify_all();
  Status status = result.get();
  if (!status.is_ok()) return status;
  return stream;
}

void EngineLoop::request_abort(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_all();
}

void EngineLoop::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineGauges EngineLoop::gauges() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineGauges g = gauges_;
  g.in_flight = queued_;
  return g;
}

// Moves submissions and aborts into the engine. Engine thread.
void EngineLoop::drain_commands() {
  std::vector<Submission> subs;
  std::vector<int64_t> aborts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    subs.swap(submissions_);
    aborts.swap(aborts_);
  }
  for (Submission& s : subs) {
    Result<int64_t> id = engine_->add_request(s.request);
    if (!id.is_ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        queued_ -= 1;
      }
      s.accepted->set_value(id.status());
      continue;
    }
    set_request_id(*s.stream, *id);
    Live live;
    live.stream = s.stream;
    live.submitted = live.last_token = Clock::now();
    live_.emplace(*id, std::move(live));
    s.accepted->set_value(Status());
  }
  for (int64_t id : aborts) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    engine_->abort(id);
    metrics_.count_abort();
    engine::RequestOutput out = ended_output(id, it->second, "cancelled");
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_ -= 1;
    }
    it->second.stream->push(std::move(out));
    live_.erase(it);
  }
}

engine::RequestOutput EngineLoop::ended_output(int64_t id, const Live& live,
                                               const std::string& reason) {
  engine::RequestOutput out;
  out.request_id = id;
  out.finished = true;
  out.finish_reason = engine::FinishReason::kAbort;
  out.error = reason;
  out.prompt_tokens = live.prompt_tokens;
  out.cached_tokens = live.cached_tokens;
  out.replayed_tokens = live.replayed_tokens;
  out.completion_tokens = live.completion_tokens;
  return out;
}

void EngineLoop::dispatch(std::vector<engine::RequestOutput>& outputs) {
  const auto now = Clock::now();
  for (engine::RequestOutput& out : outputs) {
    auto it = live_.find(out.request_id);
    if (it == live_.end()) continue;  // aborted meanwhile
    Live& live = it->second;
    if (!out.new_token_ids.empty()) {
      const double since = std::chrono::duration<double>(now - live.last_token).count();
      if (!live.got_first_token) {
        metrics_.ttft().observe(std::chrono::duration<double>(now - live.submitted).count());
        live.got_first_token = true;
        // Tokens that arrive together after the first share the step's latency.
        for (size_t i = 1; i < out.new_token_ids.size(); ++i) metrics_.inter_token().observe(0);
      } else {
        metrics_.inter_token().observe(since / double(out.new_token_ids.size()));
        for (size_t i = 1; i < out.new_token_ids.size(); ++i)
          metrics_.inter_token().observe(since / double(out.new_token_ids.size()));
      }
      live.last_token = now;
      metrics_.add_generation_tokens(int64_t(out.new_token_ids.size()));
    }
    live.completion_tokens += static_cast<int>(out.new_token_ids.size());
    if (out.prompt_tokens > 0) {
      live.prompt_tokens = out.prompt_tokens;
      live.cached_tokens = out.cached_tokens;
      live.replayed_tokens = out.replayed_tokens;
    }
    const bool done = out.finished;
    if (done) {
      metrics_.add_prompt_tokens(out.prompt_tokens);
      metrics_.e2e().observe(std::chrono::duration<double>(now - live.submitted).count());
      // Before the push: a client that has its answer must not find its request in flight.
      std::lock_guard<std::mutex> lock(mu_);
      queued_ -= 1;
    }
    live.stream->push(std::move(out));
    if (done) live_.erase(it);
  }
}

void EngineLoop::abort_all(const std::string& reason) {
  for (auto& [id, live] : live_) {
    engine_->abort(id);
    metrics_.count_abort();
    live.stream->push(ended_output(id, live, reason));
  }
  std::lock_guard<std::mutex> lock(mu_);
  queued_ -= static_cast<int>(live_.size());
  live_.clear();
}

void EngineLoop::update_gauges() {
  const auto& kv = engine_->kv_stats();
  // Expert load summary (MoE models; copying [layers x experts] counts is not free on a
  // 61 x 384 model) and the KV store's counters are refreshed at most once a second.
  const auto now = Clock::now();
  const bool refresh_slow_gauges = now - experts_refreshed_ >= std::chrono::seconds(1);
  uint64_t assignments = 0;
  double imbalance = 0;
  std::vector<std::vector<uint64_t>> experts;
  if (refresh_slow_gauges) {
    experts_refreshed_ = now;
    experts = engine_->expert_token_counts();
    for (const auto& layer : experts) {
      uint64_t sum = 0, top = 0;
      for (uint64_t x : layer) {
        sum += x;
        top = std::max(top, x);
      }
      assignments += sum;
      if (sum > 0) imbalance = std::max(imbalance, double(top) * double(layer.size()) / double(sum));
    }
  }
  std::optional<kvstore::KvStoreStats> store;
  if (refresh_slow_gauges && engine_->kv_store_tier()) store = engine_->kv_store_tier()->store_stats();
  std::lock_guard<std::mutex> lock(mu_);
  gauges_.waiting = engine_->num_waiting();
  gauges_.running = engine_->num_running();
  gauges_.prefix_lookup_tokens = kv.admitted_tokens;
  gauges_.prefix_hit_tokens = kv.hit_tokens;
  gauges_.kv_store_hit_tokens = kv.tier_hit_tokens;
  gauges_.kv_store_loaded_blocks = kv.tier_loaded_blocks;
  gauges_.kv_store_written_blocks = kv.tier_written_blocks;
  gauges_.kv_evictions = kv.evictions;
  gauges_.steps = engine_->stats().steps;
  if (const auto* sp = engine_->spec_stats()) {
    gauges_.speculative = true;
    gauges_.spec_steps = sp->steps;
    gauges_.spec_drafted = sp->drafted;
    gauges_.spec_verified = sp->verified;
    gauges_.spec_accepted = sp->accepted;
    gauges_.spec_verified_per_step.assign(sp->verified_histogram.begin(), sp->verified_histogram.end());
    gauges_.spec_accepted_per_step.assign(sp->accepted_histogram.begin(), sp->accepted_histogram.end());
  }
  if (refresh_slow_gauges && store) {
    gauges_.kv_store = true;
    gauges_.kv_store_ssd_read_blocks = store->ssd_hits;
    gauges_.kv_store_write_dropped = store->puts_dropped;
    gauges_.kv_store_write_queue = store->write_queue_depth;
    gauges_.kv_store_ram_bytes = store->host_bytes;
    gauges_.kv_store_corrupt_shards = store->ssd.corrupt_shards;
    gauges_.kv_store_reconstructions = store->ssd.reconstructions;
    gauges_.kv_store_swept = store->swept_expired + store->swept_evicted;
    gauges_.kv_store_repaired = store->ssd.repaired_entries;
    gauges_.kv_store_unusable_targets = store->ssd.unusable_targets;
    gauges_.kv_store_write_failures = store->ssd.write_failures;
    gauges_.kv_store_shard_write_errors = store->ssd.shard_write_errors;
  }
  if (refresh_slow_gauges) {
    gauges_.moe = !experts.empty();
    gauges_.moe_routed_assignments = assignments;
    gauges_.moe_max_layer_imbalance = imbalance;
  }
  gauges_.kv_blocks = engine_->kv_num_blocks();
  gauges_.kv_blocks_in_use = engine_->kv_num_blocks() - engine_->kv_num_available_blocks();
  gauges_.kv_recent_slabs = engine_->kv_num_recent_slabs();
  gauges_.kv_recent_slabs_in_use =
      engine_->kv_num_recent_slabs() - engine_->kv_num_available_recent_slabs();
  gauges_.swa_replays = engine_->kv_stats().replays;
  gauges_.swa_replayed_tokens = engine_->kv_stats().replayed_tokens;
  gauges_.swa_checkpoints_saved = engine_->kv_stats().checkpoints_saved;
  gauges_.swa_checkpoints_loaded = engine_->kv_stats().checkpoints_loaded;
  // The tier's counters change on this thread (admission), so reading them here is safe.
  if (const auto* tier = engine_->kv_store_tier())
    gauges_.swa_checkpoint_queries = tier->stats().checkpoint_queries;
}

void EngineLoop::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Idle: wake once a second so the slowly refreshed gauges (KV store, experts) catch up
      // with the last steps.
      const bool work = cv_.wait_for(lock, std::chrono::seconds(1), [&] {
        return stopping_ || !submissions_.empty() || !aborts_.empty() || engine_->has_unfinished();
      });
      if (stopping_) break;
      if (!work) {
        lock.unlock();
        update_gauges();
        continue;
      }
    }
    drain_commands();
    if (!engine_->has_unfinished()) {
      update_gauges();  // aborts may have freed blocks with no step to follow
      continue;
    }
    std::vector<engine::RequestOutput> outputs = engine_->step();
    dispatch(outputs);
    // Only grammar compiles pending: nothing to compute yet, so don't spin on the cores.
    if (outputs.empty() && engine_->num_running() == 0 && engine_->num_waiting() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    update_gauges();
  }
  // Shutdown: refuse what was submitted but never reached the engine, end what is running.
  std::vector<Submission> subs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    subs.swap(submissions_);
    queued_ -= static_cast<int>(subs.size());
  }
  for (Submission& s : subs) s.accepted->set_value(resource_exhausted("the server is shutting down"));
  abort_all(kShuttingDown);
  engine_->flush_kv_store();
}

}  // namespace deepinfer::serve
