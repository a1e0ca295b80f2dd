// Reading one entry's shard files and writing back the shards it lost: shared by the engine's
// background repair (ssd_repair.cc) and `kvstore verify --repair` (admin.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/key.h"

namespace deepinfer::kvstore {

// What came back from reading an entry's n shard files (shard i on its placement's target).
struct EntryShardReads {
  std::vector<bool> present;     // [n] the file was read and holds at least a header
  std::vector<size_t> lens;      // [n] bytes read
  std::vector<int64_t> mtimes;   // [n] the file's mtime (the entry's expiry)
  int missing = 0;               // how many are not present
};

// Reads the shard files of `key` into `images` (n = images.count()).
EntryShardReads read_entry_shards(IoEngine& io, const std::vector<std::string>& targets,
                                  const BlockKey& key, ShardImages& images);

// Re-encodes the decoded `block` with the original header, so the rewritten shards are
// byte-identical to what the writer produced (same write id) and keep the entry's expiry, and
// publishes shards `which` by rename. Returns how many were written.
int rewrite_entry_shards(IoEngine& io, const std::vector<std::string>& targets, const BlockKey& key,
                         const ErasureCode& code, const DecodeOutcome& decoded, const uint8_t* block,
                         const std::vector<int>& which, bool sync);

}  // namespace deepinfer::kvstore
