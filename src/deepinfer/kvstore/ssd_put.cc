// SsdTier's write path: existing entries checked (refresh, replace or skip), shards encoded and
// written as temps, then published with one winner per key (issue #30).
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "deepinfer/base/log.h"
#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/ssd_counters.h"
#include "deepinfer/kvstore/ssd_tier.h"

namespace deepinfer::kvstore {

namespace {

uint64_t random_write_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32)};
  uint64_t v;
  do v = rng(); while (v == 0);
  return v;
}

}  // namespace

// Existing entries: a stat of the shard files says present, a full read says usable. Only a
// usable entry makes a put a refresh; anything else is replaced (issue #30).
std::vector<bool> SsdTier::readable(IoEngine& io, std::span<const BlockKey> keys, int64_t now) {
  std::vector<bool> ok(keys.size(), false);
  if (keys.empty()) return ok;
  std::vector<std::vector<uint8_t>> blocks(keys.size(), std::vector<uint8_t>(opts_.block_bytes));
  std::vector<uint8_t*> dst(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) dst[i] = blocks[i].data();
  std::vector<bool> hit;
  std::vector<TrafficClass> classes;
  get_chunk(io, keys, dst, now, &hit, &classes, /*for_put=*/true);
  for (size_t i = 0; i < keys.size(); ++i) ok[i] = hit[i];
  return ok;
}

namespace {

// rename(2) that fails with EEXIST instead of replacing; link(2) where the file system has no
// RENAME_NOREPLACE (NFS).
int rename_noreplace(const char* from, const char* to) {
  if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::link(from, to) != 0) return errno;
  ::unlink(from);
  return 0;
}

}  // namespace

bool make_subdir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return true;
  if (errno != ENOENT) return false;
  // <target>/kv1 missing: a replaced (empty) disk. Its mount point must exist, so only the
  // layout directory is created, never the target.
  const std::string layout = dir.substr(0, dir.rfind('/'));
  if (::mkdir(layout.c_str(), 0755) != 0 && errno != EEXIST) return false;
  return ::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

int SsdTier::publish(const BlockKey& key, std::span<IoRequest> shards, std::span<const int> index,
                     bool replace) {
  // The first written shard is the claim: whoever renames it into place owns the entry and
  // publishes the rest; a concurrent writer of the same key finds it taken and discards its own
  // shards, so shards of two writes never mix.
  std::string lock;
  if (replace) {
    lock = fmt::format("{}/.replace.{}", subdir_path(opts_.targets[shards[0].domain], key), to_hex(key));
    int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {  // another process is replacing it
      for (const IoRequest& sh : shards) ::unlink(sh.path.c_str());
      return -1;
    }
    ::close(fd);
    for (int i = 0; i < code_.data_shards() + code_.parity_shards(); ++i) ::unlink(path_of(key, i).c_str());
  }
  int published = 0;
  bool claimed = false;
  for (size_t r = 0; r < shards.size(); ++r) {
    const std::string final_path = path_of(key, index[r]);
    int err = 0;
    if (!claimed) {
      err = rename_noreplace(shards[r].path.c_str(), final_path.c_str());
      if (err == EEXIST) {
        for (size_t q = r; q < shards.size(); ++q) ::unlink(shards[q].path.c_str());
        if (!lock.empty()) ::unlink(lock.c_str());
        return -1;
      }
      claimed = err == 0;
    } else if (::rename(shards[r].path.c_str(), final_path.c_str()) != 0) {
      err = errno;
    }
    if (err != 0) {
      ::unlink(shards[r].path.c_str());
      note_write_error(shards[r].domain, err);
      continue;
    }
    ++published;
    c_->bytes_written += shards[r].len;
  }
  if (!lock.empty()) ::unlink(lock.c_str());
  return published;
}

void SsdTier::note_write_error(int target, int err) {
  c_->shard_write_errors++;
  // Once per target and process: a dead disk would otherwise flood the log.
  if (!c_->write_error_logged[static_cast<size_t>(target)].exchange(true)) {
    log::warn("kvstore target {}: shard write failed: {} (counted in shard_write_errors; logged "
              "once)", opts_.targets[static_cast<size_t>(target)], std::strerror(err));
  }
}

// Existing keys: a usable entry turns the put into a refresh (ok, skip); an occupied claim
// slot of anything else means replace it, or skip while it may be a publication in progress.
void SsdTier::classify_existing(IoEngine& io, std::span<const PutItem> items, int64_t now,
                                std::vector<bool>* ok, std::vector<bool>* skip_out,
                                std::vector<bool>* replace_out) {
  const int n = code_.data_shards() + code_.parity_shards();
  std::vector<bool>& skip = *skip_out;
  std::vector<bool>& replace = *replace_out;
  skip.assign(items.size(), false);
  replace.assign(items.size(), false);
  std::vector<size_t> present;
  std::vector<BlockKey> present_keys;
  for (size_t j = 0; j < items.size(); ++j) {
    if (expiry_of(items[j].key, now) > 0) {
      present.push_back(j);
      present_keys.push_back(items[j].key);
    }
  }
  const std::vector<bool> usable = readable(io, present_keys, now);
  for (size_t p = 0; p < present.size(); ++p) {
    const PutItem& it = items[present[p]];
    if (!usable[p]) continue;
    // Same key = same prefix = same bytes: refresh instead of writing a second copy (and
    // never shorten a longer-lived class's expiry).
    const int64_t expiry = now + opts_.ttl_seconds[static_cast<int>(it.traffic_class)];
    if (expiry > expiry_of(it.key, now)) touch(it.key, expiry);
    (*ok)[present[p]] = true;
    skip[present[p]] = true;
    c_->entries_already_present++;
  }
  const int64_t wall = static_cast<int64_t>(::time(nullptr));
  for (size_t j = 0; j < items.size(); ++j) {
    if (skip[j]) continue;
    // The claim slot (first shard on a usable target) decides: free = a fresh write; taken
    // by an entry that is unreadable, expired or incomplete = replace it, unless it may be
    // another writer's publication in progress. Other slots' leftovers are overwritten.
    int slot = 0;
    while (slot < n && unusable_[placement(items[j].key, slot, num_targets())]) ++slot;
    struct stat st;
    if (slot == n || ::stat(path_of(items[j].key, slot).c_str(), &st) != 0) continue;
    if (wall - st.st_ctim.tv_sec < opts_.replace_unreadable_after_s) {
      skip[j] = true;
      c_->lost_races++;
    } else {
      replace[j] = true;
    }
  }
}

// Publishes each item's written temps (or drops them when fewer than k were written) and
// counts the outcome.
void SsdTier::publish_written(std::span<const PutItem> items, std::vector<IoRequest>& reqs,
                              const std::vector<std::pair<size_t, int>>& owner,
                              const std::vector<bool>& skip, const std::vector<bool>& replace,
                              std::vector<bool>* ok) {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  // Per item: its written temps in shard order.
  std::vector<std::vector<IoRequest>> done(items.size());
  std::vector<std::vector<int>> index(items.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    const auto [j, shard] = owner[r];
    if (reqs[r].error != 0) {
      note_write_error(reqs[r].domain, reqs[r].error);
      continue;
    }
    done[j].push_back(std::move(reqs[r]));
    index[j].push_back(shard);
  }
  for (size_t j = 0; j < items.size(); ++j) {
    if (skip[j]) continue;
    const int written = static_cast<int>(done[j].size());
    int published = 0;
    if (written >= k) {
      published = publish(items[j].key, done[j], index[j], replace[j]);
    } else {
      for (const IoRequest& r : done[j]) ::unlink(r.path.c_str());
    }
    if (published < 0) {
      (*ok)[j] = true;  // another process is storing this key
      c_->lost_races++;
    } else if (published >= k) {
      (*ok)[j] = true;
      c_->entries_written++;
      if (replace[j]) c_->replaced_unreadable++;
      if (published < n) {
        c_->degraded_writes++;
        note_degraded(items[j].key);
      }
    } else {
      const uint64_t failures = ++c_->write_failures;
      if (failures == 1 || failures % 1000 == 0) {
        log::warn("kvstore: entry {} not stored: {} of {} shards written, {} needed ({} failed "
                  "writes so far)", to_hex(items[j].key), published, n, k, failures);
      }
    }
  }
}

void SsdTier::put_chunk(IoEngine& io, std::span<const PutItem> items, int64_t now,
                        std::vector<bool>* ok) {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  ok->assign(items.size(), false);
  std::vector<bool> replace, skip;
  classify_existing(io, items, now, ok, &skip, &replace);
  std::vector<ShardImages>& images = scratch(items.size());
  std::vector<IoRequest> reqs;
  std::vector<std::pair<size_t, int>> owner;  // reqs index -> (item, shard)
  for (size_t j = 0; j < items.size(); ++j) {
    if (skip[j]) continue;
    const PutItem& it = items[j];
    ShardHeader proto;
    proto.key = it.key;
    proto.write_id = random_write_id();
    proto.block_bytes = opts_.block_bytes;
    proto.num_targets = static_cast<uint16_t>(num_targets());
    proto.traffic_class = it.traffic_class;
    proto.kind = it.kind;
    proto.created_unix = now;
    encode_entry(code_, proto, it.data, images[j]);
    for (int i = 0; i < n; ++i) {
      int t = placement(it.key, i, num_targets());
      if (unusable_[t]) continue;
      IoRequest r;
      r.path = temp_shard_path(opts_.targets[t], it.key, i);
      r.buf = images[j].file(i);
      r.len = images[j].file_bytes();
      r.domain = t;
      r.mtime_unix = now + opts_.ttl_seconds[static_cast<int>(it.traffic_class)];
      reqs.push_back(std::move(r));
      owner.emplace_back(j, i);
    }
  }
  if (reqs.empty()) return;
  io.write_files(reqs, opts_.sync_writes);
  // Subdirectories are created on first use (creating all 256 up front costs more than the
  // rare retry). Never the target itself: a vanished target must stay vanished.
  std::vector<IoRequest> retry;
  std::vector<size_t> retry_idx;
  for (size_t r = 0; r < reqs.size(); ++r) {
    if (reqs[r].error != ENOENT) continue;
    std::string dir = reqs[r].path.substr(0, reqs[r].path.rfind('/'));
    if (make_subdir(dir)) {
      retry.push_back(reqs[r]);
      retry_idx.push_back(r);
    }
  }
  if (!retry.empty()) {
    io.write_files(retry, opts_.sync_writes);
    for (size_t r = 0; r < retry.size(); ++r) reqs[retry_idx[r]] = std::move(retry[r]);
  }
  publish_written(items, reqs, owner, skip, replace, ok);
}

}  // namespace deepinfer::kvstore
