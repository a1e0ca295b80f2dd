#include "deepinfer/serve/pd_entrypoint.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <httplib.h>

#include "deepinfer/base/log.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/serve/pd_protocol.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kAffinityTokens = 256;         // the prompt head that keys cache affinity
constexpr size_t kMaxAffinityEntries = 1 << 16;
constexpr int64_t kAffinitySlackTokens = 8192;  // how much busier the affine engine may be
constexpr int kMaxDecodeAttempts = 3;
constexpr int kReadTimeoutSeconds = 3600;    // a long generation streams for this long at most

uint64_t prompt_head_hash(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the head's token ids
  const size_t n = std::min<size_t>(ids.size(), kAffinityTokens);
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(ids[i]);
    h *= 1099511628211ull;
  }
  return h ^ n;
}

uint64_t random_transfer_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

std::string error_of(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
  }
  return body.substr(0, 200);
}

}  // namespace

struct DisaggregatedBackend::Job {
  int64_t id = 0;
  std::string request_id;  // carried to the engines' logs
  engine::GenerationRequest request;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point submitted, last_token;
  int stored_tokens = 0;  // of the prompt, found in the shared KV store by the entrypoint
  bool got_first_token = false;
  bool finished = false;
};

Result<std::unique_ptr<DisaggregatedBackend>> DisaggregatedBackend::create(engine::ModelRecipe recipe,
                                                                           const EntrypointOptions& options) {
  std::unique_ptr<DisaggregatedBackend> b(new DisaggregatedBackend());
  b->recipe_ = std::move(recipe);
  b->options_ = options;
  DI_ASSIGN_OR_RETURN(b->prefill_pool_, EnginePool::create("prefill", options.prefill_urls));
  DI_ASSIGN_OR_RETURN(b->decode_pool_, EnginePool::create("decode", options.decode_urls));
  if (!options.kv_store_dirs.empty()) {
    kvstore::KvStoreConfig c;
    c.targets = options.kv_store_dirs;
    // The entrypoint only asks which blocks exist (batch_exists reads no value), so the value
    // size is not used; it keeps no RAM tier and leaves sweeping to the engines.
    c.block_bytes = 1;
    c.host_tier_bytes = 0;
    c.sweep_interval_s = 0;
    auto store = kvstore::KvStore::open(std::move(c));
    if (!store.is_ok())
      return Status(store.status().code(), "entrypoint --kv-store: " + store.status().message());
    b->store_ = std::move(store).value();
    b->store_id_ = b->store_->store_id();
  }
  b->prefill_pool_->refresh(b->kv_namespace_);
  b->decode_pool_->refresh(b->kv_namespace_);
  b->update_lookup_keys();
  DisaggregatedBackend* self = b.get();
  b->health_ = std::thread([self] { self->health_loop(); });
  return b;
}

DisaggregatedBackend::~DisaggregatedBackend() { shutdown(); }

void DisaggregatedBackend::health_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.health_interval, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    prefill_pool_->refresh(kv_namespace_);
    decode_pool_->refresh(kv_namespace_);
    update_lookup_keys();
    lock.lock();
  }
}

void DisaggregatedBackend::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !health_.joinable()) return;
    stopping_ = true;
  }
  stop_requested_ = true;
  cv_.notify_all();
  if (health_.joinable()) health_.join();
  // Jobs see stop_requested_ at their next output; one waiting on an engine (a prefill still
  // computing, a decode engine that stopped answering) is woken by stopping its connection.
  // The backend is destroyed only after every job thread is done with it.
  std::unique_lock lock(mu_);
  while (active_ > 0) {
    for (httplib::Client* c : clients_) c->stop();
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return active_ == 0; }))
      log::warn("entrypoint: waiting for {} requests to stop", active_);
  }
}

void DisaggregatedBackend::track(httplib::Client* client, bool add) {
  std::lock_guard lock(mu_);
  if (add) {
    clients_.push_back(client);
    if (stopping_) client->stop();
  } else {
    clients_.erase(std::find(clients_.begin(), clients_.end(), client));
  }
}

void DisaggregatedBackend::update_lookup_keys() {
  if (!store_) return;
  // Every healthy engine shares kv_namespace_ (the pools mark the others down); the block size
  // and the store come from one that has this store.
  for (const auto& e : decode_pool_->healthy()) {
    if (decode_pool_->kv_store_id(*e) != store_id_) continue;
    kvstore::BlockKey root{};
    if (!kvstore::from_hex(kv_namespace_, &root) || e->kv_block_tokens <= 0) continue;
    std::lock_guard lock(mu_);
    lookup_root_ = root;
    lookup_block_tokens_ = e->kv_block_tokens;
    lookup_ready_ = true;
    return;
  }
}

int DisaggregatedBackend::stored_prefix_tokens(const std::vector<int32_t>& prompt) {
  kvstore::BlockKey key{};
  int block = 0;
  {
    std::lock_guard lock(mu_);
    if (!store_ || !lookup_ready_) return 0;
    key = lookup_root_;
    block = lookup_block_tokens_;
  }
  store_lookups_ += 1;
  int stored = 0;
  for (size_t end = size_t(block); end <= prompt.size(); end += size_t(block)) {
    key = kvstore::chain_key(key, std::span(prompt).subspan(end - size_t(block), size_t(block)));
    if (store_->batch_exists(std::span(&key, 1)) != 1) break;
    stored += block;
  }
  store_hit_tokens_ += uint64_t(stored);
  return stored;
}

bool DisaggregatedBackend::ready(std::string& why) const {
  const bool p = !prefill_pool_->healthy().empty(), d = !decode_pool_->healthy().empty();
  if (p && d) return true;
  why = prefill_pool_->describe() + "; " + decode_pool_->describe();
  return false;
}

EngineGauges DisaggregatedBackend::gauges() const {
  EngineGauges g;
  std::lock_guard lock(mu_);
  g.in_flight = active_;
  return g;
}

std::string DisaggregatedBackend::extra_metrics() const {
  std::string out = pool_metrics_text({prefill_pool_.get(), decode_pool_.get()});
  auto counter = [&out](const char* name, const char* help, uint64_t value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
  };
  counter("deepinfer_pd_prefill_retries_total", "Prompts sent to another prefill engine after one failed.",
          prefill_retries_.load());
  counter("deepinfer_pd_decode_failures_total", "Requests ended by a decode engine that failed.",
          decode_failures_.load());
  counter("deepinfer_pd_refused_total", "Requests refused with 503 because a pool had no healthy engine.",
          refused_.load());
  counter("deepinfer_pd_store_lookups_total", "Prompts the entrypoint looked up in the shared KV store.",
          store_lookups_.load());
  counter("deepinfer_pd_store_hit_tokens_total", "Prompt tokens those lookups found stored.",
          store_hit_tokens_.load());
  counter("deepinfer_pd_prefill_skipped_total",
          "Requests sent straight to a decode engine: every full block of the prompt was in the store.",
          prefill_skipped_.load());
  prefill_seconds_.render("deepinfer_pd_prefill_seconds",
                          "Prefill pool: the prefill call as the entrypoint sees it (queue, compute, KV transfer).", out);
  decode_first_token_seconds_.render("deepinfer_pd_decode_first_token_seconds",
                                     "Decode pool: from asking the decode engine to its first token.", out);
  decode_tpot_seconds_.render("deepinfer_pd_decode_time_per_output_token_seconds",
                              "Decode pool: time per output token after the first.", out);
  return out;
}

Result<std::shared_ptr<RequestStream>> DisaggregatedBackend::submit(const engine::GenerationRequest& request) {
  if (!request.images.empty())
    return unsupported("image inputs are not carried by the disaggregated deployment yet; serve this model "
                       "with --role all");
  DI_RETURN_IF_ERROR(engine::validate_generation_request(request, recipe_.config));
  auto job = std::make_shared<Job>();
  job->id = next_id_++;
  job->request_id = fmt::format("req-{:016x}", random_transfer_id());
  job->request = request;
  job->stream = new_stream(this, job->id);
  job->submitted = Clock::now();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return resource_exhausted("the server is shutting down");
    if (active_ >= options_.max_queued_requests)
      return resource_exhausted("the server's request queue is full ({} requests); retry later",
                                options_.max_queued_requests);
    if (prefill_pool_->healthy().empty() || decode_pool_->healthy().empty()) {
      refused_ += 1;
      return resource_exhausted("no engine to serve the request ({}; {})", prefill_pool_->describe(),
                                decode_pool_->describe());
    }
    active_ += 1;
  }
  std::thread([this, job] {
    run(job);
    std::lock_guard lock(mu_);
    active_ -= 1;
    cv_.notify_all();
  }).detach();
  return job->stream;
}

std::shared_ptr<RemoteEngine> DisaggregatedBackend::pick_decode(const std::vector<std::string>& exclude,
                                                                const std::string& store_id) {
  std::vector<std::shared_ptr<RemoteEngine>> candidates;
  for (auto& e : decode_pool_->healthy()) {
    if (std::find(exclude.begin(), exclude.end(), e->address) != exclude.end()) continue;
    if (!store_id.empty() && decode_pool_->kv_store_id(*e) != store_id) continue;
    candidates.push_back(e);
  }
  return least_loaded_decode(candidates);
}

std::shared_ptr<RemoteEngine> DisaggregatedBackend::pick_prefill(const Job& job, const std::vector<std::string>& exclude) {
  std::vector<std::shared_ptr<RemoteEngine>> candidates;
  for (auto& e : prefill_pool_->healthy())
    if (std::find(exclude.begin(), exclude.end(), e->address) == exclude.end()) candidates.push_back(e);
  if (candidates.empty()) return nullptr;
  auto least = *std::min_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a->queued_prompt_tokens != b->queued_prompt_tokens ? a->queued_prompt_tokens < b->queued_prompt_tokens
                                                              : a->in_flight < b->in_flight;
  });
  std::string affine;
  {
    std::lock_guard lock(mu_);
    auto it = affinity_.find(prompt_head_hash(job.request.prompt_ids));
    if (it != affinity_.end()) affine = it->second;
  }
  for (auto& e : candidates)
    if (e->address == affine && e->queued_prompt_tokens <= least->queued_prompt_tokens + kAffinitySlackTokens)
      return e;
  return least;
}

bool DisaggregatedBackend::prefill(Job& job, const std::shared_ptr<RemoteEngine>& decode, uint64_t transfer_id,
                                   int& blocks, int& cached, bool& decode_unreachable, std::string& error) {
  const auto started = Clock::now();
  const json body = {{"protocol", pd::kProtocolVersion}, {"request_id", job.request_id},
                     {"request", pd::request_to_json(job.request)}, {"transfer_id", transfer_id},
                     {"kv_peer", decode_pool_->kv_address(*decode)}};
  const std::string text = dump_json(body);
  // The load it puts on a prefill engine: what the store does not already hold.
  const int64_t prompt_tokens = static_cast<int64_t>(job.request.prompt_ids.size()) - job.stored_tokens;
  std::vector<std::string> tried;
  while (!job.stream->cancelled()) {
    auto engine = pick_prefill(job, tried);
    if (!engine) {
      if (error.empty()) error = "no healthy prefill engine";
      return false;
    }
    if (!tried.empty()) prefill_retries_ += 1;
    tried.push_back(engine->address);
    engine->in_flight += 1;
    engine->requests += 1;
    engine->queued_prompt_tokens += prompt_tokens;
    httplib::Client cli(engine->host, engine->port);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(kReadTimeoutSeconds, 0);
    track(&cli, true);
    auto res = cli.Post("/internal/v1/prefill", text, "application/json");
    track(&cli, false);
    engine->in_flight -= 1;
    engine->queued_prompt_tokens -= prompt_tokens;
    if (!res) {
      error = fmt::format("prefill engine {} failed: {}", engine->address, httplib::to_string(res.error()));
      prefill_pool_->mark_down(engine, error);
      log::warn("entrypoint {}: {}; trying another", job.request_id, error);
      continue;
    }
    if (res->status == 200) {
      const json reply = json::parse(res->body, nullptr, false);
      blocks = reply.is_object() ? reply.value("blocks", 0) : 0;
      cached = reply.is_object() ? reply.value("cached_tokens", 0) : 0;
      prefill_seconds_.observe(std::chrono::duration<double>(Clock::now() - started).count());
      std::lock_guard lock(mu_);
      if (affinity_.size() >= kMaxAffinityEntries) affinity_.clear();
      affinity_[prompt_head_hash(job.request.prompt_ids)] = engine->address;
      return true;
    }
    error = fmt::format("prefill engine {}: {}", engine->address, error_of(res->body));
    if (res->status == 502) {  // the blocks could not reach the decode engine
      decode_unreachable = true;
      return false;
    }
    if (res->status >= 400 && res->status < 500) return false;  // the request's fault: no retry
    prefill_pool_->mark_down(engine, error);
    log::warn("entrypoint {}: {}; trying another", job.request_id, error);
  }
  error = "cancelled";
  return false;
}

void DisaggregatedBackend::finish_with_error(Job& job, const std::string& error) {
  engine::RequestOutput out;
  out.request_id = job.id;
  out.finished = true;
  out.finish_reason = engine::FinishReason::kAbort;
  out.error = error;
  out.prompt_tokens = static_cast<int>(job.request.prompt_ids.size());
  job.finished = true;
  job.stream->push(std::move(out));
}

void DisaggregatedBackend::decode(Job& job, const std::shared_ptr<RemoteEngine>& engine, uint64_t transfer_id,
                                  int blocks, int cached) {
  const json body = {{"protocol", pd::kProtocolVersion}, {"request_id", job.request_id},
                     {"request", pd::request_to_json(job.request)}, {"transfer_id", transfer_id},
                     {"expected_blocks", blocks}};
  engine->in_flight += 1;
  engine->requests += 1;
  const auto asked = Clock::now();
  bool decode_first_seen = false;
  httplib::Client cli(engine->host, engine->port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(kReadTimeoutSeconds, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/internal/v1/generate";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = dump_json(body);
  std::string pending;  // bytes of an unfinished line
  std::string error_body;
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, len);
      return error_body.size() < (1 << 16);
    }
    pending.append(data, len);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const json line = json::parse(pending.begin() + std::ptrdiff_t(start), pending.begin() + std::ptrdiff_t(nl),
                                    nullptr, false);
      auto out = pd::output_from_json(line);
      if (!out.is_ok()) {
        error_body = "bad output line from the decode engine: " + out.status().message();
        return false;
      }
      engine::RequestOutput o = std::move(out).value();
      o.request_id = job.id;
      if (o.prompt_tokens > 0 && transfer_id != 0) o.cached_tokens = cached;  // what prefill reused
      const auto now = Clock::now();
      if (!o.new_token_ids.empty()) {
        if (!decode_first_seen) {
          decode_first_token_seconds_.observe(std::chrono::duration<double>(now - asked).count());
          decode_first_seen = true;
        } else {
          decode_tpot_seconds_.observe(std::chrono::duration<double>(now - job.last_token).count() /
                                       double(o.new_token_ids.size()));
        }
        if (!job.got_first_token) {
          metrics_.ttft().observe(std::chrono::duration<double>(now - job.submitted).count());
          job.got_first_token = true;
        } else {
          metrics_.inter_token().observe(std::chrono::duration<double>(now - job.last_token).count() /
                                         double(o.new_token_ids.size()));
        }
        job.last_token = now;
        metrics_.add_generation_tokens(int64_t(o.new_token_ids.size()));
      }
      if (o.finished) {
        metrics_.add_prompt_tokens(o.prompt_tokens);
        metrics_.e2e().observe(std::chrono::duration<double>(now - job.submitted).count());
        job.finished = true;
      }
      job.stream->push(std::move(o));
    }
    pending.erase(0, start);
    return !job.stream->cancelled() && !stop_requested_;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  track(&cli, true);
  const bool ok = cli.send(req, res, err);
  track(&cli, false);
  engine->in_flight -= 1;
  if (job.finished) return;
  if (job.stream->cancelled()) return finish_with_error(job, "cancelled");
  if (stop_requested_) return finish_with_error(job, kShuttingDown);
  std::string why;
  if (ok && status != 200) {
    why = fmt::format("decode engine {}: {}", engine->address, error_of(error_body));
    if (status >= 500) decode_pool_->mark_down(engine, why);
  } else {
    why = fmt::format("decode engine {} stopped mid-generation ({})", engine->address,
                      ok ? "the stream ended early" : httplib::to_string(err));
    decode_pool_->mark_down(engine, why);
  }
  decode_failures_ += 1;
  log::warn("entrypoint {}: {}", job.request_id, why);
  finish_with_error(job, why);
}

void DisaggregatedBackend::run(const std::shared_ptr<Job>& job_ptr) {
  Job& job = *job_ptr;
  std::vector<std::string> bad_decoders;
  const bool prompt_logprobs = job.request.prompt_logprobs >= 0;  // then decode computes all
  int block_tokens = 0;
  if (!prompt_logprobs) {
    job.stored_tokens = stored_prefix_tokens(job.request.prompt_ids);
    std::lock_guard lock(mu_);
    block_tokens = lookup_block_tokens_;
  }
  const int prompt_len = static_cast<int>(job.request.prompt_ids.size());
  // Every full block stored: a decode engine on the same store needs nothing from prefill.
  const bool all_stored = job.stored_tokens > 0 && prompt_len - job.stored_tokens < block_tokens;
  for (int attempt = 0; attempt < kMaxDecodeAttempts && !job.stream->cancelled(); ++attempt) {
    auto decoder = all_stored ? pick_decode(bad_decoders, store_id_) : nullptr;
    if (!decoder) decoder = pick_decode(bad_decoders);
    if (!decoder) return finish_with_error(job, "no healthy decode engine (" + decode_pool_->describe() + ")");
    int blocks = 0, cached = 0;
    uint64_t transfer_id = 0;
    const bool skip_prefill = all_stored && decode_pool_->kv_store_id(*decoder) == store_id_;
    if (skip_prefill) prefill_skipped_ += 1;
    if (!prompt_logprobs && !skip_prefill) {
      transfer_id = random_transfer_id();
      bool unreachable = false;
      std::string error;
      if (!prefill(job, decoder, transfer_id, blocks, cached, unreachable, error)) {
        if (unreachable) {
          decode_pool_->mark_down(decoder, error);
          bad_decoders.push_back(decoder->address);
          continue;
        }
        return finish_with_error(job, job.stream->cancelled() ? "cancelled" : error);
      }
    }
    return decode(job, decoder, transfer_id, blocks, cached);
  }
  finish_with_error(job, "no decode engine could take the request's KV blocks");
}

}  // namespace deepinfer::serve
