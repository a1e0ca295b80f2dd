// SsdTier's counters, shared by its implementation files (ssd_*.cc); not part of the interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>

#include "deepinfer/kvstore/ssd_tier.h"

namespace deepinfer::kvstore {

struct SsdTier::Counters {
  std::atomic<uint64_t> entries_written{0}, entries_already_present{0}, write_failures{0},
      degraded_writes{0}, shard_write_errors{0}, hits{0}, misses{0}, expired_misses{0},
      corrupt_shards{0}, reconstructions{0}, unrecoverable{0}, bytes_read{0}, bytes_written{0},
      lost_races{0}, replaced_unreadable{0}, repaired_entries{0}, repaired_shards{0},
      startup_temps_removed{0};
  std::unique_ptr<std::atomic<bool>[]> write_error_logged;  // [targets]
};

struct SsdTier::RepairQueue {
  static constexpr size_t kMaxQueued = 4096;
  std::mutex mu;
  std::deque<BlockKey> keys;
  std::set<BlockKey> queued;
  int next_bucket = 0;
};

}  // namespace deepinfer::kvstore
