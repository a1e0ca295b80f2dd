// The internal protocol between the roles of a disaggregated deployment (docs/pd.md): JSON over
// HTTP for control (the entrypoint to prefill and decode engines), UCX messages for KV blocks
// (prefill engine to decode engine, src/deepinfer/transfer). Every role speaks the same codec.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/request.h"
#include "deepinfer/kvstore/shard_format.h"

namespace deepinfer::serve::pd {

// 2: a KV block message says its entry kind (KV block or sliding-window checkpoint part).
inline constexpr int kProtocolVersion = 2;

// Engine requests and outputs as JSON (every field; an image as its span, its hash and its
// embeddings, float32 rows in base64, as the entrypoint's vision encoder made them). Decoding validates types and names the field that is wrong.
nlohmann::json request_to_json(const engine::GenerationRequest& r);
Result<engine::GenerationRequest> request_from_json(const nlohmann::json& j);
nlohmann::json output_to_json(const engine::RequestOutput& o);
Result<engine::RequestOutput> output_from_json(const nlohmann::json& j);

// One KV block on the wire: a fixed header (magic, protocol version, block index, store key,
// entry kind) then the block's bytes (KvStoreTier layout).
struct KvBlockMessage {
  int32_t index = 0;
  std::array<uint8_t, 32> key{};
  kvstore::EntryKind kind = kvstore::EntryKind::kKvBlock;
  std::span<const uint8_t> bytes;
};
std::vector<uint8_t> encode_kv_block(int32_t index, const std::array<uint8_t, 32>& key,
                                     std::span<const uint8_t> bytes,
                                     kvstore::EntryKind kind = kvstore::EntryKind::kKvBlock);
// The view points into `message`. An error names what is wrong (short, bad magic, version or
// entry kind).
Result<KvBlockMessage> decode_kv_block(std::span<const uint8_t> message);

// One layer of a prompt's blocks on the wire (layer-by-layer transfer): a header (magic,
// protocol version, layer, layer count, block count), the blocks' store keys, then each
// block's slice of that layer, back to back (engine::KvExportSink::export_layer).
struct KvLayerMessage {
  int32_t layer = 0;
  int32_t num_layers = 0;
  std::vector<std::array<uint8_t, 32>> keys;  // [n]
  std::span<const uint8_t> slices;            // [n * slice bytes]
};
std::vector<uint8_t> encode_kv_layer(int32_t layer, int32_t num_layers,
                                     std::span<const std::array<uint8_t, 32>> keys,
                                     std::span<const uint8_t> slices);
Result<KvLayerMessage> decode_kv_layer(std::span<const uint8_t> message);
// Whether a KV message is a layer message (else a whole block, or garbage that decoding names).
bool is_kv_layer_message(std::span<const uint8_t> message);

}  // namespace deepinfer::serve::pd
