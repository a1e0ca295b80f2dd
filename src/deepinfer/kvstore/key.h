// Block keys: a SHA-256 chain over fixed-size token blocks, salted with a namespace, so one key
// names a whole prefix of one model/layout/shard and no other model can ever read it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::kvstore {

using BlockKey = std::array<uint8_t, 32>;

// Everything that changes the bytes of a KV block. Two engines share cache entries only when
// every field matches.
struct Namespace {
  std::string model_id;        // e.g. "deepseek-ai/DeepSeek-V3"
  std::string revision;        // checkpoint revision / content hash
  uint32_t kv_layout_version = 1;
  std::string dtype;           // e.g. "bf16"
  uint32_t block_tokens = 0;   // tokens per block
  uint32_t shard_index = 0;    // tensor-parallel shard this KV slice belongs to
  uint32_t shard_count = 1;
};

// Key of the empty prefix: a digest of the namespace alone. The first block's parent.
BlockKey root_key(const Namespace& ns);

// SHA-256(parent || token count || token ids as little-endian int32 [|| extra]). The parent
// already carries the namespace (via root_key), so a chain started from root_key(ns) is
// namespaced end to end. `extra`: words that decide the block's KV besides its tokens (the
// engine passes each image's content hash and span); empty gives the text-only key.
BlockKey chain_key(const BlockKey& parent, std::span<const int32_t> tokens,
                   std::span<const uint64_t> extra = {});

// Convenience: keys of every full block of `tokens` (block_tokens from ns); a trailing partial
// block gets no key.
std::vector<BlockKey> prefix_keys(const Namespace& ns, std::span<const int32_t> tokens);

std::string to_hex(const BlockKey& key);
// False when `hex` is not 64 hex digits.
bool from_hex(std::string_view hex, BlockKey* out);

// First 8 bytes as an integer: well mixed (SHA-256 output), used for placement and hashing.
uint64_t key_prefix64(const BlockKey& key);

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(key_prefix64(k)); }
};

}  // namespace deepinfer::kvstore
