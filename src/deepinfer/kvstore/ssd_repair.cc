// Background repair (issue #30): entries with lost or corrupt shards get them rewritten from the
// survivors by the sweeper, a few per sweep, so a store that lost targets regains its tolerance
// without an operator. Candidates: degraded entries readers and writers met, then a rotating
// scan of one key bucket (1/256 of the store) per sweep.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/entry_io.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/ssd_counters.h"
#include "deepinfer/kvstore/ssd_tier.h"

namespace deepinfer::kvstore {


void SsdTier::note_degraded(const BlockKey& key) {
  std::lock_guard lock(repair_->mu);
  if (repair_->keys.size() >= RepairQueue::kMaxQueued || !repair_->queued.insert(key).second) return;
  repair_->keys.push_back(key);
}

std::vector<BlockKey> SsdTier::scan_bucket_for_degraded(int bucket, int64_t now, size_t limit) const {
  const int n = code_.data_shards() + code_.parity_shards();
  std::map<BlockKey, int> shards;
  std::set<BlockKey> young;
  const int64_t wall = static_cast<int64_t>(::time(nullptr));
  for (int t = 0; t < num_targets(); ++t) {
    if (unusable_[t]) continue;
    const std::string dir = fmt::format("{}/{}/{:02x}", opts_.targets[t], kLayoutDir, bucket);
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      BlockKey key;
      int shard = 0;
      if (!parse_shard_name(e->d_name, &key, &shard)) continue;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0) continue;
      if (st.st_mtim.tv_sec <= now) continue;  // expired: the sweeper's job
      // A write may still be publishing its shards.
      if (wall - st.st_ctim.tv_sec < opts_.replace_unreadable_after_s) young.insert(key);
      ++shards[key];
    }
    ::closedir(d);
  }
  std::vector<BlockKey> out;
  for (const auto& [key, count] : shards) {
    if (out.size() >= limit) break;
    int expected = 0;  // shards on targets we can write to
    for (int i = 0; i < n; ++i) expected += !unusable_[placement(key, i, num_targets())];
    if (count < expected && count >= code_.data_shards() && !young.count(key)) out.push_back(key);
  }
  return out;
}

int SsdTier::repair_entry(IoEngine& io, const BlockKey& key, int64_t now) {
  const int n = code_.data_shards() + code_.parity_shards();
  ShardImages images(n, shard_bytes_);
  const EntryShardReads got = read_entry_shards(io, opts_.targets, key, images);
  std::vector<uint8_t> block(opts_.block_bytes);
  DecodeOutcome o =
      decode_entry(code_, key, opts_.block_bytes, images, got.present, got.lens, got.mtimes, block.data());
  if (!o.ok || o.max_mtime <= now) return -1;
  std::vector<int> lost;  // the shards to write back: gone or bad, on a target we can write to
  for (int i = 0; i < n; ++i) {
    if (!o.valid[i] && !unusable_[placement(key, i, num_targets())]) lost.push_back(i);
  }
  return rewrite_entry_shards(io, opts_.targets, key, code_, o, block.data(), lost, opts_.sync_writes);
}

void SsdTier::repair_some(IoEngine& io, int64_t now, SweepReport* report) {
  const size_t budget = static_cast<size_t>(opts_.repair_per_sweep);
  std::vector<BlockKey> work;
  int bucket = 0;
  {
    std::lock_guard lock(repair_->mu);
    while (!repair_->keys.empty() && work.size() < budget) {
      work.push_back(repair_->keys.front());
      repair_->queued.erase(repair_->keys.front());
      repair_->keys.pop_front();
    }
    bucket = repair_->next_bucket;
    repair_->next_bucket = (bucket + 1) % 256;
  }
  if (work.size() < budget) {
    for (const BlockKey& key : scan_bucket_for_degraded(bucket, now, budget - work.size())) {
      if (std::find(work.begin(), work.end(), key) == work.end()) work.push_back(key);
    }
  }
  for (const BlockKey& key : work) {
    const int fixed = repair_entry(io, key, now);
    if (fixed <= 0) continue;
    c_->repaired_entries++;
    c_->repaired_shards += static_cast<uint64_t>(fixed);
    report->repaired_entries++;
  }
}

}  // namespace deepinfer::kvstore
