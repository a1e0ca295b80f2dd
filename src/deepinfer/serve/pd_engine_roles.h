// The engine side of prefill/decode disaggregation (docs/pd.md): `serve --role prefill` and
// `serve --role decode` are the all-in-one server plus an internal API.
//
// Prefill engine, POST /internal/v1/prefill {request_id, request, transfer_id, kv_peer}:
//   computes the prompt (the request with max_tokens 1, greedy, no grammar or stop strings; its
//   token is dropped), sends every full prompt block to the decode engine at `kv_peer` over UCX
//   (KvSender, messages tagged with transfer_id: one per layer as the forward that completes
//   the prompt computes it, or, for caches that cannot be cut by layer, one per block after
//   it) and answers, once all are delivered, {prompt_tokens, cached_tokens, blocks, seconds}.
// Decode engine, GET /internal/v1/info gives its UCX address ("kv_address"); blocks that
//   arrive go into its KV store RAM tier (layer messages are put together first). POST /internal/v1/generate {request_id, request,
//   transfer_id, expected_blocks} waits (bounded) for that many blocks of the transfer, then
//   runs the request as usual: its admission finds the blocks as a prefix hit and computes only
//   the prompt's last partial block, samples the first token and decodes. The answer is chunked
//   NDJSON, one engine output per line (pd_protocol.h), so tokens stream back as they come.
// Both answer GET /internal/v1/info {role, protocol, model, kv_namespace, kv_block_tokens,
// kv_store_id, kv_address, running, waiting, kv_cache_usage}: the entrypoint checks that the
// engines agree on the namespace, uses the KV fields for its own lookup of the shared KV store
// and the load for its decode balancer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "deepinfer/engine/kv_export.h"
#include "deepinfer/engine/kv_store_tier.h"
#include "deepinfer/serve/engine_loop.h"
#include "deepinfer/serve/http_server.h"
#include "deepinfer/transfer/kv_transfer.h"

namespace deepinfer::serve {

// What an engine's KV blocks are keyed by, for the entrypoint: the hex root key of the chain
// (every setting that changes a block's bytes), tokens per block, and the shared store's id
// ("" without --kv-store).
struct EngineKvIdentity {
  std::string kv_namespace;
  int block_tokens = 0;
  std::string store_id;
};
EngineKvIdentity engine_kv_identity(const engine::KvStoreTier* tier);

// Counters both engine roles export on /metrics.
struct PdEngineCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> blocks{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> wait_timeouts{0};  // decode: blocks still missing when the wait ended
  std::atomic<uint64_t> transfer_micros{0};  // prefill: time from prompt computed to delivered
  std::atomic<uint64_t> layer_messages{0};   // layer-by-layer messages sent or received
};

class PrefillRole : public engine::KvExportSink {
 public:
  // `loop` runs the engine whose export sink this becomes (set before the loop starts).
  // `by_layer`: send each layer's KV as the forward computes it (where the cache allows it).
  static Result<std::unique_ptr<PrefillRole>> create(engine::Engine& engine, bool by_layer = true);
  void attach(EngineLoop* loop, std::string model_name) {
    loop_ = loop;
    model_name_ = std::move(model_name);
  }
  RoleHooks hooks();

  // KvExportSink (engine thread).
  void export_block(const std::string& tag, int index, const std::array<uint8_t, 32>& key,
                    std::span<const uint8_t> bytes, kvstore::EntryKind kind) override;
  void export_layer(const std::string& tag, int layer, int num_layers,
                    std::span<const std::array<uint8_t, 32>> keys, std::span<const uint8_t> bytes) override;
  void export_done(const std::string& tag, int blocks) override;

 private:
  PrefillRole() = default;
  nlohmann::json handle_prefill(const nlohmann::json& body);

  std::unique_ptr<transfer::KvSender> sender_;
  EngineLoop* loop_ = nullptr;
  std::string model_name_;
  EngineKvIdentity kv_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> exported_;  // tag -> blocks handed over (export_done seen)
  PdEngineCounters counters_;
};

class DecodeRole {
 public:
  static Result<std::unique_ptr<DecodeRole>> create(engine::Engine& engine);
  void attach(EngineLoop* loop, std::string model_name) {
    loop_ = loop;
    model_name_ = std::move(model_name);
  }
  RoleHooks hooks();
  const std::string& kv_address() const { return receiver_->address(); }

 private:
  DecodeRole() = default;
  void on_message(uint64_t transfer_id, std::vector<uint8_t> message);
  // A layer message: its slices go into the transfer's blocks; once every layer came, the
  // blocks are imported. Returns the blocks imported by this message (0 until complete).
  int on_layer(uint64_t transfer_id, std::span<const uint8_t> message);
  // Arrival of `blocks` blocks of a transfer (the generate request waits for them).
  void count_arrival(uint64_t transfer_id, int blocks);

  // Blocks of a layer-by-layer transfer being put together (receiver thread only).
  struct LayerAssembly {
    int num_layers = 0;
    std::vector<std::array<uint8_t, 32>> keys;
    std::vector<uint8_t> bytes;       // [keys.size() * block bytes]
    std::vector<bool> layer_seen;     // [num_layers]
    int layers = 0;                   // seen so far
  };
  std::map<uint64_t, LayerAssembly> assembling_;

  engine::KvStoreTier* tier_ = nullptr;
  std::unique_ptr<transfer::KvReceiver> receiver_;
  EngineLoop* loop_ = nullptr;
  std::string model_name_;
  EngineKvIdentity kv_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, int> arrived_;  // transfer id -> blocks imported so far
  PdEngineCounters counters_;
};

// "role" info both engines answer on GET /internal/v1/info.
nlohmann::json engine_role_info(const std::string& role, const std::string& model_name,
                                const EngineKvIdentity& kv, const std::string& kv_address,
                                const EngineGauges& load);

}  // namespace deepinfer::serve
