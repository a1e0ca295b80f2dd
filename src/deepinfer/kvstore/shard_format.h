// On-disk shard file: a 128-byte self-describing header (key, code parameters, checksums) then
// the shard payload, zero-padded to a multiple of 4096 so one Direct I/O call moves the file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

inline constexpr size_t kShardHeaderBytes = 128;
inline constexpr size_t kIoAlign = 4096;  // Direct I/O granularity (covers 512e and 4Kn disks)

// What an entry holds: the store treats every kind alike (same size, keys, lifetime); the kind
// only lets `kvstore stat` count them apart. Old files (the byte was zero) are KV blocks.
enum class EntryKind : uint8_t {
  kKvBlock = 0,        // one block of a prefix's KV (or paged state)
  kSwaCheckpoint = 1,  // part of a sliding-window checkpoint at a cached prefix's end
};
inline constexpr int kNumEntryKinds = 2;

struct ShardHeader {
  BlockKey key{};
  uint64_t write_id = 0;      // random per put: shards of one put decode together, never mixed
  uint64_t block_hash = 0;    // XXH3-64 of the whole block value (checked after decoding)
  uint64_t payload_hash = 0;  // XXH3-64 of this shard's payload
  uint64_t block_bytes = 0;
  uint32_t shard_bytes = 0;
  uint16_t shard_index = 0;   // 0..k-1 data, k..k+m-1 parity
  uint8_t data_shards = 0;
  uint8_t parity_shards = 0;
  uint16_t num_targets = 0;   // placement: shard i lives on target (key_prefix64 + i) % num_targets
  TrafficClass traffic_class = TrafficClass::kChat;
  EntryKind kind = EntryKind::kKvBlock;
  int64_t created_unix = 0;
};

inline size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
inline size_t shard_file_bytes(size_t shard_bytes) {
  return round_up(kShardHeaderBytes + shard_bytes, kIoAlign);
}
// Payload bytes per shard for a block: block split k ways, padded to 64 for the SIMD encoder.
inline size_t shard_bytes_for(size_t block_bytes, int data_shards) {
  return round_up((block_bytes + data_shards - 1) / data_shards, 64);
}

uint64_t checksum64(const void* data, size_t len);

// Writes the header (with its own checksum) into dst[0..128).
void write_shard_header(const ShardHeader& h, uint8_t* dst);

// Parses and validates a shard file image: magic, version, header checksum, sizes, payload
// checksum. `path` only names the file in error messages.
Result<ShardHeader> parse_shard_file(const uint8_t* file, size_t file_len, const char* path);

// Header only (for sweeps that read 128 bytes, not the payload).
Result<ShardHeader> parse_shard_header(const uint8_t* src, size_t len, const char* path);

}  // namespace deepinfer::kvstore
