// One cached block <-> its k+m shard file images. Encoding splits and erasure-codes the block;
// decoding validates every shard, keeps only shards of one put (write_id), rebuilds the missing
// ones and checks the whole-block hash, so a bad shard is at worst a miss, never served.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "deepinfer/kvstore/erasure.h"
#include "deepinfer/kvstore/shard_format.h"

namespace deepinfer::kvstore {

// k+m page-aligned file images of equal size in one allocation.
class ShardImages {
 public:
  ShardImages() = default;
  ShardImages(int count, size_t shard_bytes);
  int count() const { return count_; }
  size_t shard_bytes() const { return shard_bytes_; }
  size_t file_bytes() const { return file_bytes_; }
  uint8_t* file(int i) { return mem_.get() + static_cast<size_t>(i) * file_bytes_; }
  uint8_t* payload(int i) { return file(i) + kShardHeaderBytes; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  int count_ = 0;
  size_t shard_bytes_ = 0, file_bytes_ = 0;
  std::unique_ptr<uint8_t, Free> mem_;
};

// Fills every image's header and payload. `proto` supplies key, write_id, class, counts and
// time; per-shard fields and hashes are computed here.
void encode_entry(const ErasureCode& code, const ShardHeader& proto, const uint8_t* block,
                  ShardImages& images);

struct DecodeOutcome {
  bool ok = false;
  ShardHeader header;             // of the chosen write (shard_index meaningless)
  std::vector<bool> valid;        // [k + m] shard was intact and belonged to the chosen write
  int corrupt_shards = 0;         // present but failed validation
  int intact_shards = 0;          // intact shards of the best-represented write (also on failure)
  int writes_seen = 0;            // distinct write ids among intact shards (>1: mixed writes)
  bool reconstructed = false;     // some data shard came from parity
  int64_t max_mtime = 0;          // latest expiry stamp among valid shards
};

// present[i]: images.file(i) holds file_len[i] bytes read from shard i's file (mtime[i] its
// mtime). Writes the block to dst on success. Rebuilt shards are left in `images` (for repair).
DecodeOutcome decode_entry(const ErasureCode& code, const BlockKey& key, size_t block_bytes,
                           ShardImages& images, const std::vector<bool>& present,
                           const std::vector<size_t>& file_len, const std::vector<int64_t>& mtime,
                           uint8_t* dst);

}  // namespace deepinfer::kvstore
