// Offline administration of a set of targets for `deepinfer kvstore stat|verify|gc|rm DIR...`.
// Works from the self-describing shard files (no config needed) and is safe to run while engines
// use the same targets. verify, gc and rm check the list against the store manifest (every
// target, in the order the engines use) and refuse a list that does not match it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

struct TargetUsage {
  std::string path;
  bool present = false;       // the target directory exists
  uint64_t bytes = 0;         // shard files
  uint64_t shard_files = 0;
  uint64_t temp_files = 0;
  uint64_t expired_shards = 0;
};

struct StoreStat {
  std::vector<TargetUsage> targets;
  uint64_t entries = 0;  // distinct keys with at least one shard
  uint64_t entries_by_class[kNumTrafficClasses] = {};
  uint64_t entries_by_kind[kNumEntryKinds] = {};  // KV blocks, sliding-window checkpoint parts
  uint64_t unreadable_headers = 0;
  // By shard files present (not read): fewer than k+m but at least k = degraded, awaiting
  // repair (the engines' sweepers or `verify --repair`); fewer than k = never readable.
  uint64_t degraded_entries = 0;
  uint64_t incomplete_entries = 0;
  uint64_t bytes = 0;
  std::string store_id;  // from the manifests; empty when none was found
};

// now: unix seconds (0 = the system clock) for counting expired shards.
Result<StoreStat> stat_store(const std::vector<std::string>& targets, int64_t now = 0);

struct VerifyOptions {
  bool repair = false;                // rewrite lost/corrupt shards from the survivors
  bool delete_unrecoverable = false;  // remove entries with fewer than k intact shards (--repair)
  int64_t grace_s = 60;               // younger entries may be a write still being published
  IoMode io_mode = IoMode::kAuto;
  bool direct_io = true;
};

struct VerifyReport {
  uint64_t entries = 0;
  uint64_t healthy = 0;             // all k+m shards intact
  uint64_t degraded = 0;            // readable but some shards missing or corrupt
  uint64_t repaired_entries = 0;
  uint64_t repaired_shards = 0;
  uint64_t unrecoverable = 0;       // k or more shard files, but fewer than k intact
  uint64_t incomplete = 0;          // fewer than k shard files: never visible to readers
                                    // (a writer killed mid-publish); gc removes them
  uint64_t foreign = 0;             // written for another target count: not checked
  uint64_t manifests_written = 0;   // --repair: replaced (empty) targets joined the store
  uint64_t deleted = 0;
  uint64_t missing_shards = 0;
  uint64_t corrupt_shards = 0;
  std::vector<std::string> problems;  // first few, for humans
};

Result<VerifyReport> verify_store(const std::vector<std::string>& targets,
                                  const VerifyOptions& options = {});

struct GcOptions {
  int64_t now = 0;                        // unix seconds; 0 = the system clock
  uint64_t target_capacity_bytes = 0;     // also evict soonest-to-expire entries beyond this
  int64_t orphan_grace_s = 600;           // entries with < k shards older than this are removed
};

struct GcReport {
  uint64_t expired_entries = 0;
  uint64_t evicted_entries = 0;
  uint64_t orphan_entries = 0;      // fewer than k shard files, or fewer than k of one write
  uint64_t foreign_entries = 0;     // written for another target count: kept
  uint64_t stale_temps = 0;
  uint64_t files_removed = 0;
  uint64_t bytes_freed = 0;
};

Result<GcReport> gc_store(const std::vector<std::string>& targets, const GcOptions& options = {});

// Deletes every shard of the given entries (64-hex keys); returns the shard files removed.
Result<uint64_t> remove_entries(const std::vector<std::string>& targets,
                                const std::vector<std::string>& hex_keys);

}  // namespace deepinfer::kvstore
