// The SSD tier: each entry erasure-coded into k+m shard files on k+m of N targets, published by
// rename, expiry kept in the files' mtime, swept and evicted by whichever process holds a
// target's flock. No state is shared between processes except the files themselves.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/erasure.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

class ShardImages;

struct SsdTierOptions {
  std::vector<std::string> targets;
  int data_shards = 10;
  int parity_shards = 2;
  size_t block_bytes = 0;
  int64_t ttl_seconds[kNumTrafficClasses] = {3 * 86400, 7 * 86400};
  uint64_t target_capacity_bytes = 0;  // 0 = unlimited
  int64_t touch_interval_s = 60;       // refresh an entry's expiry at most this often
  IoMode io_mode = IoMode::kAuto;
  bool direct_io = true;
  bool sync_writes = false;            // fdatasync each shard before publishing it
};

struct PutItem {
  BlockKey key;
  const uint8_t* data = nullptr;  // block_bytes
  TrafficClass traffic_class = TrafficClass::kChat;
};

struct SsdStats {
  uint64_t entries_written = 0;
  uint64_t entries_already_present = 0;
  uint64_t write_failures = 0;    // fewer than k shards could be written: not published
  uint64_t degraded_writes = 0;   // published with some shards missing
  uint64_t shard_write_errors = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t expired_misses = 0;
  uint64_t corrupt_shards = 0;    // present but failed validation (treated as missing)
  uint64_t reconstructions = 0;   // reads that needed parity
  uint64_t unrecoverable = 0;     // some shards found, but fewer than k intact: a miss
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

struct SweepReport {
  uint64_t expired_entries = 0;
  uint64_t evicted_entries = 0;
  uint64_t stale_temps = 0;
  uint64_t targets_busy = 0;  // another process was sweeping them
};

class SsdTier {
 public:
  // Validates options and creates <target>/kv1. Every target must exist or be
  // creatable at open; later a vanished target only costs its shards.
  static Result<std::unique_ptr<SsdTier>> open(SsdTierOptions options);
  ~SsdTier();

  const SsdTierOptions& options() const { return opts_; }
  const ErasureCode& code() const { return code_; }
  int num_targets() const { return static_cast<int>(opts_.targets.size()); }
  std::string path_of(const BlockKey& key, int shard) const;

  // ok[i]: item i is stored (newly or already) with at least k shards.
  void put_batch(IoEngine& io, std::span<const PutItem> items, int64_t now, std::vector<bool>* ok);
  // hit[i]: dst[i] holds the block bit-exact. Refreshes expiry of hits.
  void get_batch(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                 int64_t now, std::vector<bool>* hit,
                 std::vector<TrafficClass>* classes = nullptr);
  // At least k unexpired shard files exist (contents are checked by get).
  bool exists(const BlockKey& key, int64_t now) const;
  // Latest expiry among the shards when the entry exists, else 0.
  int64_t expiry_of(const BlockKey& key, int64_t now) const;
  void remove(const BlockKey& key) const;
  // Deletes expired entries and dead writers' temps, then evicts soonest-to-expire entries of
  // targets over capacity. Targets another process is sweeping are skipped.
  SweepReport sweep(int64_t now);

  SsdStats stats() const;

 private:
  explicit SsdTier(SsdTierOptions options, ErasureCode code);
  void put_chunk(IoEngine& io, std::span<const PutItem> items, int64_t now, std::vector<bool>* ok);
  void get_chunk(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                 int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes);
  size_t chunk_entries() const;
  std::vector<ShardImages>& scratch(size_t count) const;
  void touch(const BlockKey& key, int64_t expiry) const;
  void sweep_target(int t, int64_t now, SweepReport* report);

  SsdTierOptions opts_;
  ErasureCode code_;
  size_t shard_bytes_ = 0;
  struct Counters;
  std::unique_ptr<Counters> c_;
};

}  // namespace deepinfer::kvstore
