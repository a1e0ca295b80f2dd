// Content address of a full KV block: a 128-bit hash chained over the parent block's key, so
// one key names a whole prefix (namespace + every token up to the end of the block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace deepinfer::engine {

// 128 bits so that a collision (which would silently serve another prompt's KV) is not a
// practical concern even with billions of cached blocks.
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
};

// The key every chain starts from: a hash of the namespace (model id, weights revision, KV
// dtype...), so that two models never share blocks.
BlockHash root_block_hash(std::string_view cache_namespace);

// Key of the block holding `tokens` (exactly block_size of them) after the prefix named by
// `parent`. `extra`: what else decides the block's KV besides its token ids (the content hash
// and span of each image it holds, engine/image_block_keys.h); empty for text, whose keys are
// then exactly those of a chain without it.
BlockHash chain_block_hash(const BlockHash& parent, std::span<const int32_t> tokens,
                           std::span<const uint64_t> extra = {});

}  // namespace deepinfer::engine
