// The KV store the engine talks to (issue #7): host-memory LRU tier over an erasure-coded SSD
// tier shared by any number of engine processes. Puts are asynchronous and never block;
// prefetches run on a reader thread and land in the host tier.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/ssd_tier.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

struct KvStoreConfig {
  std::vector<std::string> targets;  // SSD target directories; empty = host tier only
  // 0 = automatic: 10+2 with >= 12 targets, else m = min(2, N-1) parity and k = N - m data.
  int data_shards = 0;
  int parity_shards = -1;  // -1 = automatic
  size_t block_bytes = 0;  // every value has exactly this size
  size_t host_tier_bytes = size_t{256} << 20;
  int64_t ttl_seconds[kNumTrafficClasses] = {3 * 86400, 7 * 86400};  // agent, chat
  uint64_t target_capacity_bytes = 0;  // per target; 0 = unlimited
  size_t write_queue_depth = 256;      // queued SSD writes beyond this are dropped (counted)
  double sweep_interval_s = 60;        // background sweeper period; 0 = no sweeper thread
  int64_t touch_interval_s = 60;
  IoMode io_mode = IoMode::kAuto;
  bool direct_io = true;
  bool sync_writes = false;
  // A put over an entry that cannot be read replaces it once its newest shard is this old.
  int64_t replace_unreadable_after_s = 10;
  int repair_per_sweep = 64;  // degraded entries the sweeper rewrites per sweep
  std::function<int64_t()> clock;      // unix seconds; null = system clock. Tests inject one.
};

struct KvStoreStats {
  uint64_t host_hits = 0;
  uint64_t ssd_hits = 0;
  uint64_t misses = 0;
  uint64_t puts = 0;
  uint64_t puts_dropped = 0;  // SSD write queue full
  uint64_t write_queue_depth = 0;
  uint64_t host_bytes = 0;
  uint64_t host_entries = 0;
  uint64_t host_evictions = 0;
  uint64_t swept_expired = 0;
  uint64_t swept_evicted = 0;
  bool io_uring = false;
  SsdStats ssd;
};

class KvStore {
 public:
  static Result<std::unique_ptr<KvStore>> open(KvStoreConfig config);
  ~KvStore();  // drains queued writes, stops threads
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  const KvStoreConfig& config() const { return cfg_; }
  int data_shards() const;
  int parity_shards() const;
  // The SSD store's identity (its manifest's store id; every process opening the same targets
  // sees the same one); "" for a RAM-only store.
  std::string store_id() const;

  // Length of the longest prefix of `keys` that is cached (host or SSD).
  size_t batch_exists(std::span<const BlockKey> keys);
  // The same, counting the host (RAM) tier only: never touches storage.
  size_t host_prefix_length(std::span<const BlockKey> keys);
  // Reads keys[0..) into dst[i] (block_bytes each) until the first miss; returns how many.
  // `reader`: the requesting traffic class; a hit keeps the longer of its lifetime and the
  // writer's.
  size_t batch_get(std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                   std::optional<TrafficClass> reader = std::nullopt);
  // Copies each block into the host tier and queues its SSD write. Never blocks on I/O; when
  // the queue is full the SSD write is dropped and counted. Returns how many were accepted
  // (queued for the SSD; or, for a store without targets, kept in RAM).
  // `kind` is recorded in the shard headers (kvstore stat counts entries by kind). The SSD
  // writes of a kSwaCheckpoint put are queued all or none, and only while the queue is at most
  // half full (blocks keep the other half).
  size_t batch_put(std::span<const BlockKey> keys, std::span<const uint8_t* const> src,
                   TrafficClass traffic_class, EntryKind kind = EntryKind::kKvBlock);
  // Loads the cached prefix of `keys` into the host tier in the background; the future gives
  // its length (then batch_get of that many keys is served from RAM unless evicted meanwhile).
  std::future<size_t> prefetch(std::vector<BlockKey> keys,
                               std::optional<TrafficClass> reader = std::nullopt);
  void remove(const BlockKey& key);

  // Waits until every queued SSD write has been attempted.
  void flush();
  // Runs one sweep (expiry, stale temps, capacity eviction) now.
  SweepReport sweep_now();
  KvStoreStats stats() const;

 private:
  struct Impl;
  explicit KvStore(KvStoreConfig config);
  int64_t now() const;
  size_t load_prefix(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                     std::optional<TrafficClass> reader);

  KvStoreConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::kvstore
