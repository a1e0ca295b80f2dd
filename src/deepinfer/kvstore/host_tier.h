// Host-memory tier: an LRU of whole blocks bounded in bytes, with per-entry expiry so a block
// never outlives its traffic class's TTL here either. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "deepinfer/kvstore/key.h"

namespace deepinfer::kvstore {

using BlockBytes = std::shared_ptr<const std::vector<uint8_t>>;

class HostTier {
 public:
  explicit HostTier(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Inserts or replaces; evicts least recently used entries to fit. A block larger than the
  // whole tier is not kept.
  void put(const BlockKey& key, BlockBytes value, int64_t ttl_seconds, int64_t now);
  // Copies the block into dst (dst_bytes must equal its size) and refreshes recency and expiry.
  bool get(const BlockKey& key, uint8_t* dst, size_t dst_bytes, int64_t now);
  bool contains(const BlockKey& key, int64_t now);
  void erase(const BlockKey& key);

  size_t bytes() const;
  size_t entries() const;
  uint64_t evictions() const;

 private:
  struct Entry {
    BlockKey key;
    BlockBytes value;
    int64_t ttl = 0;
    int64_t expiry = 0;
  };
  using List = std::list<Entry>;  // front = most recently used
  void erase_locked(List::iterator it);

  mutable std::mutex mu_;
  size_t capacity_;
  size_t bytes_ = 0;
  uint64_t evictions_ = 0;
  List lru_;
  std::unordered_map<BlockKey, List::iterator, BlockKeyHash> index_;
};

}  // namespace deepinfer::kvstore
