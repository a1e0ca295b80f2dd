// XXH3-128 over (parent key bytes, token id bytes[, extra words]); the namespace enters through
// the root key.
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

BlockHash chain_block_hash(const BlockHash& parent, std::span<const int32_t> tokens,
                           std::span<const uint64_t> extra) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, kChainSeed);
  uint64_t head[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, head, sizeof(head));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  if (!extra.empty()) {
    // The count first: (tokens, extra) never reads as a longer token list with no extra.
    const uint64_t n = extra.size() | (uint64_t{1} << 63);
    XXH3_128bits_update(&state, &n, sizeof(n));
    XXH3_128bits_update(&state, extra.data(), extra.size_bytes());
  }
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace deepinfer::engine
