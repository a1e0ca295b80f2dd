// XXH3-128 over (parent key bytes, token id bytes); the namespace enters through the root key.
#include "deepinfer/engine/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack, no heap per key
#include <xxhash.h>

namespace deepinfer::engine {
namespace {
// Distinguishes the root hash from a chained hash of an empty block (never produced, but the
// domains should not overlap).
constexpr uint64_t kRootSeed = 0x6465657069667231ull;
constexpr uint64_t kChainSeed = 0x6465657069667232ull;

BlockHash from_xxh(XXH128_hash_t h) { return BlockHash{h.low64, h.high64}; }
}  // namespace

BlockHash root_block_hash(std::string_view cache_namespace) {
  return from_xxh(XXH3_128bits_withSeed(cache_namespace.data(), cache_namespace.size(), kRootSeed));
}

BlockHash chain_block_hash(const BlockHash& parent, std::span<const int32_t> tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, kChainSeed);
  uint64_t head[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, head, sizeof(head));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace deepinfer::engine
