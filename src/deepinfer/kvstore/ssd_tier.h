// The SSD tier: each entry erasure-coded into k+m shard files on k+m of N targets, published by
// rename, expiry kept in the files' mtime, swept and evicted by whichever process holds a
// target's flock. No state is shared between processes except the files themselves.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/erasure.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

class ShardImages;

// Creates <target>/kv1/<xx> (and <target>/kv1 when missing, never the target itself).
bool make_subdir(const std::string& dir);

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
  // Take k+m from the store manifest when the store exists (the caller asked for "automatic").
  bool coding_from_manifest = false;
  // A put over an entry that cannot be read replaces it once the entry's newest shard is this
  // old (younger ones may be a write still being published by another process).
  int64_t replace_unreadable_after_s = 10;
  // Degraded entries rewritten per sweep (background repair); 0 = none.
  int repair_per_sweep = 64;
};

struct PutItem {
  BlockKey key;
  const uint8_t* data = nullptr;  // block_bytes
  TrafficClass traffic_class = TrafficClass::kChat;
  EntryKind kind = EntryKind::kKvBlock;
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
  uint64_t lost_races = 0;          // another process published the same key first
  uint64_t replaced_unreadable = 0; // puts that replaced an entry that could not be read
  uint64_t repaired_entries = 0;    // degraded entries rewritten in the background
  uint64_t repaired_shards = 0;
  uint64_t startup_temps_removed = 0;  // crashed writers' temps removed when opening
  uint64_t unusable_targets = 0;    // targets unusable since open (missing, read-only)
};

struct SweepReport {
  uint64_t expired_entries = 0;
  uint64_t evicted_entries = 0;
  uint64_t stale_temps = 0;
  uint64_t targets_busy = 0;  // another process was sweeping them
  uint64_t repaired_entries = 0;
};

class SsdTier {
 public:
  // Validates options and creates <target>/kv1. Every target must exist or be
  // creatable at open; later a vanished target only costs its shards.
  static Result<std::unique_ptr<SsdTier>> open(SsdTierOptions options);
  ~SsdTier();

  const SsdTierOptions& options() const { return opts_; }
  const std::string& store_id() const { return store_id_; }
  bool target_usable(int t) const { return !unusable_[t]; }
  const ErasureCode& code() const { return code_; }
  int num_targets() const { return static_cast<int>(opts_.targets.size()); }
  std::string path_of(const BlockKey& key, int shard) const;

  // ok[i]: item i is stored (newly or already) with at least k shards.
  void put_batch(IoEngine& io, std::span<const PutItem> items, int64_t now, std::vector<bool>* ok);
  // hit[i]: dst[i] holds the block bit-exact. Refreshes expiry of hits to the longer of the
  // writer's class lifetime and the reader's (a chat hit on agent-written blocks keeps them
  // for the chat lifetime).
  void get_batch(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                 int64_t now, std::vector<bool>* hit,
                 std::vector<TrafficClass>* classes = nullptr,
                 std::optional<TrafficClass> reader = std::nullopt);
  int64_t ttl_for(TrafficClass writer, std::optional<TrafficClass> reader) const;
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
  // for_put: a writer checking existing entries (no hit/miss counting, no touch).
  void get_chunk(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                 int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes,
                 bool for_put = false, std::optional<TrafficClass> reader = std::nullopt);
  void publish_written(std::span<const PutItem> items, std::vector<IoRequest>& reqs,
                       const std::vector<std::pair<size_t, int>>& owner, const std::vector<bool>& skip,
                       const std::vector<bool>& replace, std::vector<bool>* ok);
  void classify_existing(IoEngine& io, std::span<const PutItem> items, int64_t now,
                         std::vector<bool>* ok, std::vector<bool>* skip, std::vector<bool>* replace);
  // Which of the present entries in `keys` decode (full read): a writer's existence check.
  std::vector<bool> readable(IoEngine& io, std::span<const BlockKey> keys, int64_t now);
  // Publishes one entry's written temps: one winner by a no-replace rename of the first shard.
  int publish(const BlockKey& key, std::span<IoRequest> shards, std::span<const int> index,
              bool replace);
  void remove_dead_temps();
  void note_write_error(int target, int err);
  size_t chunk_entries() const;
  std::vector<ShardImages>& scratch(size_t count) const;
  void touch(const BlockKey& key, int64_t expiry) const;
  void sweep_target(int t, int64_t now, SweepReport* report, bool temps_only = false);
  void repair_some(IoEngine& io, int64_t now, SweepReport* report);
  // Rewrites an entry's lost or corrupt shards from the survivors; how many were rewritten
  // (-1: the entry does not decode).
  int repair_entry(IoEngine& io, const BlockKey& key, int64_t now);
  void note_degraded(const BlockKey& key);
  std::vector<BlockKey> scan_bucket_for_degraded(int bucket, int64_t now, size_t limit) const;

  SsdTierOptions opts_;
  ErasureCode code_;
  size_t shard_bytes_ = 0;
  std::string store_id_;
  std::vector<bool> unusable_;  // [targets] found unusable at open
  struct Counters;
  std::unique_ptr<Counters> c_;
  struct RepairQueue;  // degraded keys seen by readers and writers, and the scan cursor
  std::unique_ptr<RepairQueue> repair_;
};

}  // namespace deepinfer::kvstore
