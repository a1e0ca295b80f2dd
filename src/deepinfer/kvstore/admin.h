// Offline administration of a set of targets for `deepinfer kvstore stat|verify|gc DIR...`.
// Works from the self-describing shard files alone (no config needed) and is safe to run while
// engines use the same targets. Targets must be given in the same order the engines use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/io_engine.h"
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
  uint64_t unreadable_headers = 0;
  uint64_t bytes = 0;
};

// now: unix seconds (0 = the system clock) for counting expired shards.
Result<StoreStat> stat_store(const std::vector<std::string>& targets, int64_t now = 0);

struct VerifyOptions {
  bool repair = false;                // rewrite lost/corrupt shards from the survivors
  bool delete_unrecoverable = false;  // remove entries with fewer than k intact shards
  IoMode io_mode = IoMode::kAuto;
  bool direct_io = true;
};

struct VerifyReport {
  uint64_t entries = 0;
  uint64_t healthy = 0;             // all k+m shards intact
  uint64_t degraded = 0;            // readable but some shards missing or corrupt
  uint64_t repaired_entries = 0;
  uint64_t repaired_shards = 0;
  uint64_t unrecoverable = 0;       // fewer than k intact shards
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
  uint64_t orphan_entries = 0;
  uint64_t stale_temps = 0;
  uint64_t files_removed = 0;
  uint64_t bytes_freed = 0;
};

Result<GcReport> gc_store(const std::vector<std::string>& targets, const GcOptions& options = {});

}  // namespace deepinfer::kvstore
