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

namespace deepinfer::serve::pd {

inline constexpr int kProtocolVersion = 1;

// Engine requests and outputs as JSON (every field; images are not carried: the entrypoint
// refuses image prompts). Decoding validates types and names the field that is wrong.
nlohmann::json request_to_json(const engine::GenerationRequest& r);
Result<engine::GenerationRequest> request_from_json(const nlohmann::json& j);
nlohmann::json output_to_json(const engine::RequestOutput& o);
Result<engine::RequestOutput> output_from_json(const nlohmann::json& j);

// One KV block on the wire: a fixed header (magic, protocol version, block index, store key)
// then the block's bytes (KvStoreTier layout).
struct KvBlockMessage {
  int32_t index = 0;
  std::array<uint8_t, 32> key{};
  std::span<const uint8_t> bytes;
};
std::vector<uint8_t> encode_kv_block(int32_t index, const std::array<uint8_t, 32>& key,
                                     std::span<const uint8_t> bytes);
// The view points into `message`. An error names what is wrong (short, bad magic or version).
Result<KvBlockMessage> decode_kv_block(std::span<const uint8_t> message);

}  // namespace deepinfer::serve::pd
