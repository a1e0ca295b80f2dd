#include "deepinfer/serve/pd_engine_roles.h"

#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <httplib.h>

#include "deepinfer/base/log.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/serve/api_error.h"
#include "deepinfer/serve/pd_protocol.h"
#include "deepinfer/serve/server_context.h"

namespace deepinfer::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long a decode engine waits for the blocks the entrypoint says are on their way (they
// were delivered before the prefill engine answered, so this only covers the receiver
// thread's import); past it the request runs and computes what is missing.
constexpr auto kBlockWait = std::chrono::seconds(10);
// Transfers a decode engine keeps arrival counts for at once.
constexpr size_t kMaxPendingTransfers = 4096;
// How long a prefill engine waits for its blocks to be delivered.
constexpr auto kDeliveryTimeout = std::chrono::seconds(60);

std::string hex(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}


// The tag a prefill request carries: "<transfer id>@<decode engine's UCX address>".
std::string make_tag(uint64_t transfer_id, const std::string& peer) {
  return fmt::format("{}@{}", transfer_id, peer);
}
bool parse_tag(const std::string& tag, uint64_t& transfer_id, std::string& peer) {
  const size_t at = tag.find('@');
  if (at == std::string::npos || at == 0) return false;
  try {
    transfer_id = std::stoull(tag.substr(0, at));
  } catch (...) {
    return false;
  }
  peer = tag.substr(at + 1);
  return !peer.empty();
}

json parse_internal_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) throw ApiError(400, "", "internal API: the body is not a JSON object");
  if (body.value("protocol", 0) != pd::kProtocolVersion)
    throw ApiError(400, "protocol", fmt::format("internal API: protocol {} (this engine speaks {})",
                                                body.value("protocol", 0), pd::kProtocolVersion));
  return body;
}

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(dump_json({{"error", e.what()}}), "application/json");
}

std::string counters_text(const std::string& role, const PdEngineCounters& c) {
  return fmt::format(
      "# HELP deepinfer_pd_requests_total Internal requests this {0} engine served.\n"
      "# TYPE deepinfer_pd_requests_total counter\ndeepinfer_pd_requests_total{{role=\"{0}\"}} {1}\n"
      "# HELP deepinfer_pd_kv_blocks_total KV blocks sent (prefill) or received (decode).\n"
      "# TYPE deepinfer_pd_kv_blocks_total counter\ndeepinfer_pd_kv_blocks_total{{role=\"{0}\"}} {2}\n"
      "# HELP deepinfer_pd_kv_bytes_total Bytes of those blocks.\n"
      "# TYPE deepinfer_pd_kv_bytes_total counter\ndeepinfer_pd_kv_bytes_total{{role=\"{0}\"}} {3}\n"
      "# HELP deepinfer_pd_kv_failures_total Transfers that failed (peer gone, bad message).\n"
      "# TYPE deepinfer_pd_kv_failures_total counter\ndeepinfer_pd_kv_failures_total{{role=\"{0}\"}} {4}\n"
      "# HELP deepinfer_pd_kv_wait_timeouts_total Decode requests that started with blocks still missing.\n"
      "# TYPE deepinfer_pd_kv_wait_timeouts_total counter\ndeepinfer_pd_kv_wait_timeouts_total{{role=\"{0}\"}} {5}\n"
      "# HELP deepinfer_pd_kv_transfer_seconds_total Prefill: time from prompt computed to blocks delivered.\n"
      "# TYPE deepinfer_pd_kv_transfer_seconds_total counter\ndeepinfer_pd_kv_transfer_seconds_total{{role=\"{0}\"}} {6:.6f}\n"
      "# HELP deepinfer_pd_kv_layer_messages_total KV messages of one layer of a prompt's blocks (layer-by-layer transfer).\n"
      "# TYPE deepinfer_pd_kv_layer_messages_total counter\ndeepinfer_pd_kv_layer_messages_total{{role=\"{0}\"}} {7}\n",
      role, c.requests.load(), c.blocks.load(), c.bytes.load(), c.failures.load(), c.wait_timeouts.load(),
      double(c.transfer_micros.load()) / 1e6, c.layer_messages.load());
}

}  // namespace

EngineKvIdentity engine_kv_identity(const engine::KvStoreTier* tier) {
  EngineKvIdentity id;
  if (tier == nullptr) return id;
  id.kv_namespace = hex(kvstore::root_key(tier->key_namespace()));
  id.block_tokens = static_cast<int>(tier->key_namespace().block_tokens);
  id.store_id = tier->store_id();
  return id;
}

json engine_role_info(const std::string& role, const std::string& model_name, const EngineKvIdentity& kv,
                      const std::string& kv_address, const EngineGauges& load) {
  const double usage = load.kv_blocks > 0 ? double(load.kv_blocks_in_use) / double(load.kv_blocks) : 0.0;
  return {{"role", role}, {"protocol", pd::kProtocolVersion}, {"model", model_name},
          {"kv_namespace", kv.kv_namespace}, {"kv_block_tokens", kv.block_tokens},
          {"kv_store_id", kv.store_id}, {"kv_address", kv_address},
          {"running", load.running}, {"waiting", load.waiting}, {"kv_cache_usage", usage}};
}

// ---------------------------------------------------------------- prefill

Result<std::unique_ptr<PrefillRole>> PrefillRole::create(engine::Engine& engine, bool by_layer) {
  std::unique_ptr<PrefillRole> role(new PrefillRole());
  DI_ASSIGN_OR_RETURN(role->sender_, transfer::KvSender::create());
  DI_RETURN_IF_ERROR(engine.set_kv_export_sink(role.get(), by_layer));
  role->kv_ = engine_kv_identity(engine.kv_store_tier());
  return role;
}

void PrefillRole::export_block(const std::string& tag, int index, const std::array<uint8_t, 32>& key,
                               std::span<const uint8_t> bytes, kvstore::EntryKind kind) {
  uint64_t transfer_id = 0;
  std::string peer;
  if (!parse_tag(tag, transfer_id, peer)) return;
  sender_->send(peer, transfer_id, pd::encode_kv_block(index, key, bytes, kind));
  counters_.blocks += 1;
  counters_.bytes += bytes.size();
}

void PrefillRole::export_layer(const std::string& tag, int layer, int num_layers,
                               std::span<const std::array<uint8_t, 32>> keys, std::span<const uint8_t> bytes) {
  uint64_t transfer_id = 0;
  std::string peer;
  if (!parse_tag(tag, transfer_id, peer)) return;
  sender_->send(peer, transfer_id, pd::encode_kv_layer(layer, num_layers, keys, bytes));
  if (layer == num_layers - 1) counters_.blocks += keys.size();
  counters_.bytes += bytes.size();
  counters_.layer_messages += 1;
}

void PrefillRole::export_done(const std::string& tag, int blocks) {
  {
    std::lock_guard lock(mu_);
    exported_[tag] = blocks;
  }
  cv_.notify_all();
}

json PrefillRole::handle_prefill(const json& body) {
  counters_.requests += 1;
  const std::string request_id = body.value("request_id", "");
  auto parsed = pd::request_from_json(body.value("request", json::object()));
  if (!parsed.is_ok()) throw ApiError(400, "request", parsed.status().message());
  engine::GenerationRequest request = std::move(parsed).value();
  const uint64_t transfer_id = body.value("transfer_id", uint64_t{0});
  const std::string peer = body.value("kv_peer", "");
  if (transfer_id == 0 || peer.empty()) throw ApiError(400, "kv_peer", "prefill needs transfer_id and kv_peer");
  // Only the prompt's KV matters here: one greedy token, nothing that needs the decode side.
  request.max_tokens = 1;
  request.sampling = engine::SamplingParams{};
  request.sampling.temperature = 0;
  request.grammar.reset();
  request.stop.clear();
  request.prompt_logprobs = -1;
  request.speculative = false;
  request.kv_export_tag = make_tag(transfer_id, peer);
  const auto started = Clock::now();
  auto stream = loop_->submit(request);
  if (!stream.is_ok()) throw api_error_from_status(stream.status());
  engine::RequestOutput out, last;
  while (true) {
    const auto next = (*stream)->next(out, std::chrono::milliseconds(1000));
    if (next == RequestStream::Next::kClosed) break;
    if (next == RequestStream::Next::kTimeout) continue;
    if (out.prompt_tokens > 0) last = out;
    if (out.finished) {
      if (!out.error.empty()) throw ApiError(500, "", "prefill failed: " + out.error, "server_error");
      break;
    }
  }
  const auto computed = Clock::now();
  // This pool's time to first token: the prompt computed (queue included), before the transfer.
  loop_->metrics().ttft().observe(std::chrono::duration<double>(computed - started).count());
  loop_->metrics().add_prompt_tokens(last.prompt_tokens);
  int blocks = 0;
  {
    std::unique_lock lock(mu_);
    const std::string& tag = request.kv_export_tag;
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return exported_.count(tag) > 0; }))
      throw ApiError(500, "", "prefill: the engine did not export the prompt's blocks", "server_error");
    blocks = exported_[tag];
    exported_.erase(tag);
  }
  const Status delivered = sender_->flush(transfer_id, kDeliveryTimeout);
  const double seconds = std::chrono::duration<double>(Clock::now() - computed).count();
  counters_.transfer_micros += uint64_t(seconds * 1e6);
  if (!delivered.is_ok()) {
    counters_.failures += 1;
    log::warn("prefill {}: KV transfer {} failed: {}", request_id, transfer_id, delivered.message());
    throw ApiError(502, "", "prefill: KV transfer to the decode engine failed: " + delivered.message(),
                   "server_error");
  }
  log::info("prefill {}: {} prompt tokens ({} cached), {} blocks to the decode engine in {:.3f} s",
            request_id, last.prompt_tokens, last.cached_tokens, blocks, seconds);
  return {{"prompt_tokens", last.prompt_tokens}, {"cached_tokens", last.cached_tokens},
          {"blocks", blocks}, {"seconds", seconds}};
}

RoleHooks PrefillRole::hooks() {
  RoleHooks h;
  h.install_routes = [this](httplib::Server& server, const auto& declare) {
    declare("GET", "/internal/v1/info");
    server.Get("/internal/v1/info", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_json(engine_role_info("prefill", model_name_, kv_, "", loop_->gauges())), "application/json");
    });
    declare("POST", "/internal/v1/prefill");
    server.Post("/internal/v1/prefill", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        res.set_content(dump_json(handle_prefill(parse_internal_body(req))), "application/json");
      } catch (const ApiError& e) {
        reply_error(res, e);
      } catch (const std::exception& e) {  // a field of the wrong JSON type
        reply_error(res, ApiError(400, "", std::string("prefill: ") + e.what()));
      }
    });
  };
  h.extra_metrics = [this] { return counters_text("prefill", counters_); };
  return h;
}

// ---------------------------------------------------------------- decode

namespace {
// The decode pool's own latency view of one generate request: time to first token from the
// request's arrival (the wait for its blocks included) and the time per output token after it.
struct StreamTiming {
  Clock::time_point arrived, last;
  bool first_seen = false;
  void observe(const engine::RequestOutput& out, ServerMetrics& metrics) {
    const auto now = Clock::now();
    if (!out.new_token_ids.empty()) {
      if (!first_seen) {
        metrics.ttft().observe(std::chrono::duration<double>(now - arrived).count());
        first_seen = true;
      } else {
        metrics.inter_token().observe(std::chrono::duration<double>(now - last).count() /
                                      double(out.new_token_ids.size()));
      }
      last = now;
      metrics.add_generation_tokens(int64_t(out.new_token_ids.size()));
    }
    if (out.finished) {
      metrics.add_prompt_tokens(out.prompt_tokens);
      metrics.e2e().observe(std::chrono::duration<double>(now - arrived).count());
    }
  }
};
}  // namespace

Result<std::unique_ptr<DecodeRole>> DecodeRole::create(engine::Engine& engine) {
  std::unique_ptr<DecodeRole> role(new DecodeRole());
  role->tier_ = engine.kv_import_tier();
  if (role->tier_ == nullptr) return invalid_argument("serve --role decode: the engine has no KV store tier");
  role->kv_ = engine_kv_identity(role->tier_);
  DecodeRole* self = role.get();
  DI_ASSIGN_OR_RETURN(role->receiver_, transfer::KvReceiver::create([self](uint64_t id, std::vector<uint8_t> m) {
                        self->on_message(id, std::move(m));
                      }));
  return role;
}

void DecodeRole::count_arrival(uint64_t transfer_id, int blocks) {
  {
    std::lock_guard lock(mu_);
    // Counts of transfers whose generate request never came (the entrypoint retried elsewhere)
    // would pile up; a count only matters for seconds, so a full table starts over.
    if (arrived_.size() >= kMaxPendingTransfers && !arrived_.count(transfer_id)) arrived_.clear();
    arrived_[transfer_id] += blocks;  // counted either way: the wait is for arrival, not success
  }
  cv_.notify_all();
}

int DecodeRole::on_layer(uint64_t transfer_id, std::span<const uint8_t> message) {
  auto m = pd::decode_kv_layer(message);
  if (!m.is_ok()) {
    counters_.failures += 1;
    log::warn("decode: KV transfer {}: layer message dropped: {}", transfer_id, m.status().message());
    return 0;
  }
  counters_.layer_messages += 1;
  const size_t n = m->keys.size(), block_bytes = tier_->block_bytes();
  const size_t slice = m->slices.size() / n;
  if (slice * size_t(m->num_layers) != block_bytes) {
    counters_.failures += 1;
    log::warn("decode: KV transfer {}: {} layers of {} bytes do not make this engine's {}-byte blocks",
              transfer_id, m->num_layers, slice, block_bytes);
    return 0;
  }
  if (assembling_.size() >= kMaxPendingTransfers && !assembling_.count(transfer_id)) assembling_.clear();
  LayerAssembly& a = assembling_[transfer_id];
  if (a.num_layers != m->num_layers || a.keys != m->keys) {  // new, or a retried prefill of other blocks
    a = LayerAssembly{m->num_layers, m->keys, std::vector<uint8_t>(n * block_bytes),
                      std::vector<bool>(size_t(m->num_layers)), 0};
  }
  for (size_t i = 0; i < n; ++i)
    std::memcpy(a.bytes.data() + i * block_bytes + size_t(m->layer) * slice, m->slices.data() + i * slice, slice);
  if (!a.layer_seen[size_t(m->layer)]) {
    a.layer_seen[size_t(m->layer)] = true;
    a.layers += 1;
  }
  if (a.layers < a.num_layers) return 0;
  int imported = 0;
  for (size_t i = 0; i < n; ++i) {
    if (tier_->import_block(a.keys[i], std::span(a.bytes.data() + i * block_bytes, block_bytes))) {
      imported += 1;
      counters_.blocks += 1;
      counters_.bytes += block_bytes;
    } else {
      counters_.failures += 1;
    }
  }
  if (imported < int(n)) log::warn("decode: KV transfer {}: the RAM tier refused {} of {} blocks", transfer_id, int(n) - imported, n);
  assembling_.erase(transfer_id);
  return int(n);  // arrived, whether or not the tier kept them
}

void DecodeRole::on_message(uint64_t transfer_id, std::vector<uint8_t> message) {
  if (pd::is_kv_layer_message(message)) {
    if (const int blocks = on_layer(transfer_id, message); blocks > 0) count_arrival(transfer_id, blocks);
    return;
  }
  auto block = pd::decode_kv_block(message);
  bool ok = block.is_ok() && tier_->import_block(block->key, block->bytes, block->kind);
  if (!ok) {
    counters_.failures += 1;
    log::warn("decode: KV transfer {}: block dropped: {}", transfer_id,
              block.is_ok() ? "wrong size for this engine's blocks, or the RAM tier refused it"
                            : block.status().message());
  } else {
    counters_.blocks += 1;
    counters_.bytes += block->bytes.size();
  }
  count_arrival(transfer_id, 1);
}

RoleHooks DecodeRole::hooks() {
  RoleHooks h;
  h.install_routes = [this](httplib::Server& server, const auto& declare) {
    declare("GET", "/internal/v1/info");
    server.Get("/internal/v1/info", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_json(engine_role_info("decode", model_name_, kv_, kv_address(), loop_->gauges())),
                      "application/json");
    });
    declare("POST", "/internal/v1/generate");
    server.Post("/internal/v1/generate", [this](const httplib::Request& req, httplib::Response& res) {
      std::shared_ptr<RequestStream> stream;
      auto timing = std::make_shared<StreamTiming>();
      try {
        counters_.requests += 1;
        const json body = parse_internal_body(req);
        auto parsed = pd::request_from_json(body.value("request", json::object()));
        if (!parsed.is_ok()) throw ApiError(400, "request", parsed.status().message());
        timing->arrived = Clock::now();
        const uint64_t transfer_id = body.value("transfer_id", uint64_t{0});
        const int expected = body.value("expected_blocks", 0);
        const std::string request_id = body.value("request_id", "");
        if (transfer_id != 0) {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, kBlockWait, [&] { return arrived_[transfer_id] >= expected; })) {
            counters_.wait_timeouts += 1;
            log::warn("decode {}: {} of {} KV blocks arrived; computing the rest", request_id,
                      arrived_[transfer_id], expected);
          }
          arrived_.erase(transfer_id);
        }
        log::info("decode {}: {} prompt tokens, {} KV blocks received", request_id,
                  parsed->prompt_ids.size(), expected);
        auto submitted = loop_->submit(*parsed);
        if (!submitted.is_ok()) throw api_error_from_status(submitted.status());
        stream = std::move(submitted).value();
      } catch (const ApiError& e) {
        reply_error(res, e);
        return;
      } catch (const std::exception& e) {  // a field of the wrong JSON type
        reply_error(res, ApiError(400, "", std::string("generate: ") + e.what()));
        return;
      }
      ServerMetrics& metrics = loop_->metrics();
      res.set_chunked_content_provider("application/x-ndjson", [stream, timing, &metrics](size_t, httplib::DataSink& sink) {
        engine::RequestOutput out;
        const auto next = stream->next(out, std::chrono::milliseconds(500));
        if (next == RequestStream::Next::kClosed) {
          sink.done();
          return true;
        }
        if (next == RequestStream::Next::kTimeout) {
          if (!sink.is_writable()) {
            stream->cancel();
            return false;
          }
          return true;
        }
        timing->observe(out, metrics);
        const std::string line = dump_json(pd::output_to_json(out)) + "\n";
        if (!sink.write(line.data(), line.size())) {
          stream->cancel();
          return false;
        }
        if (out.finished) sink.done();
        return true;
      }, [stream](bool) { stream->cancel(); });
    });
  };
  h.extra_metrics = [this] { return counters_text("decode", counters_); };
  return h;
}

}  // namespace deepinfer::serve
