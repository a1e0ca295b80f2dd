// Shard header encoding: fixed little-endian offsets, XXH3-64 over the header and the payload.
#include "deepinfer/kvstore/shard_format.h"

#include <cstring>

#include <xxhash.h>

namespace deepinfer::kvstore {
namespace {

constexpr char kMagic[8] = {'D', 'I', 'K', 'V', 'S', 'H', 'D', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderHashOffset = 120;

template <typename T>
void put(uint8_t* dst, size_t off, T v) {
  std::memcpy(dst + off, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* src, size_t off) {
  T v;
  std::memcpy(&v, src + off, sizeof(T));
  return v;
}

}  // namespace

uint64_t checksum64(const void* data, size_t len) { return XXH3_64bits(data, len); }

void write_shard_header(const ShardHeader& h, uint8_t* dst) {
  std::memset(dst, 0, kShardHeaderBytes);
  std::memcpy(dst, kMagic, 8);
  put<uint32_t>(dst, 8, kVersion);
  put<uint32_t>(dst, 12, static_cast<uint32_t>(kShardHeaderBytes));
  std::memcpy(dst + 16, h.key.data(), 32);
  put<uint64_t>(dst, 48, h.write_id);
  put<uint64_t>(dst, 56, h.block_hash);
  put<uint64_t>(dst, 64, h.payload_hash);
  put<uint64_t>(dst, 72, h.block_bytes);
  put<uint32_t>(dst, 80, h.shard_bytes);
  put<uint16_t>(dst, 84, h.shard_index);
  dst[86] = h.data_shards;
  dst[87] = h.parity_shards;
  put<uint16_t>(dst, 88, h.num_targets);
  dst[90] = static_cast<uint8_t>(h.traffic_class);
  dst[91] = static_cast<uint8_t>(h.kind);
  put<int64_t>(dst, 96, h.created_unix);
  put<uint64_t>(dst, kHeaderHashOffset, checksum64(dst, kHeaderHashOffset));
}

Result<ShardHeader> parse_shard_header(const uint8_t* src, size_t len, const char* path) {
  if (len < kShardHeaderBytes) return corrupt("shard {}: {} bytes, shorter than a header", path, len);
  if (std::memcmp(src, kMagic, 8) != 0) return corrupt("shard {}: bad magic", path);
  if (get<uint32_t>(src, 8) != kVersion) {
    return corrupt("shard {}: unknown version {}", path, get<uint32_t>(src, 8));
  }
  if (get<uint64_t>(src, kHeaderHashOffset) != checksum64(src, kHeaderHashOffset)) {
    return corrupt("shard {}: header checksum mismatch", path);
  }
  ShardHeader h;
  std::memcpy(h.key.data(), src + 16, 32);
  h.write_id = get<uint64_t>(src, 48);
  h.block_hash = get<uint64_t>(src, 56);
  h.payload_hash = get<uint64_t>(src, 64);
  h.block_bytes = get<uint64_t>(src, 72);
  h.shard_bytes = get<uint32_t>(src, 80);
  h.shard_index = get<uint16_t>(src, 84);
  h.data_shards = src[86];
  h.parity_shards = src[87];
  h.num_targets = get<uint16_t>(src, 88);
  if (src[90] >= kNumTrafficClasses) return corrupt("shard {}: traffic class {}", path, src[90]);
  h.traffic_class = static_cast<TrafficClass>(src[90]);
  if (src[91] >= kNumEntryKinds) return corrupt("shard {}: entry kind {}", path, src[91]);
  h.kind = static_cast<EntryKind>(src[91]);
  h.created_unix = get<int64_t>(src, 96);
  if (h.data_shards == 0 || h.shard_index >= h.data_shards + h.parity_shards ||
      h.num_targets < h.data_shards + h.parity_shards ||
      h.shard_bytes != shard_bytes_for(h.block_bytes, h.data_shards)) {
    return corrupt("shard {}: inconsistent header (shard {} of {}+{}, {} targets, {} bytes)", path,
                   h.shard_index, h.data_shards, h.parity_shards, h.num_targets, h.shard_bytes);
  }
  return h;
}

Result<ShardHeader> parse_shard_file(const uint8_t* file, size_t file_len, const char* path) {
  DI_ASSIGN_OR_RETURN(ShardHeader h, parse_shard_header(file, file_len, path));
  if (file_len < kShardHeaderBytes + h.shard_bytes) {
    return corrupt("shard {}: truncated ({} bytes, need {})", path, file_len,
                   kShardHeaderBytes + h.shard_bytes);
  }
  if (checksum64(file + kShardHeaderBytes, h.shard_bytes) != h.payload_hash) {
    return corrupt("shard {}: payload checksum mismatch", path);
  }
  return h;
}

}  // namespace deepinfer::kvstore
