// SSD tier: batched erasure-coded puts and gets, expiry in mtime (sweeping: ssd_sweep.cc).
#include "deepinfer/kvstore/ssd_tier.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <unordered_set>

#include <fmt/format.h>

#include "deepinfer/base/log.h"
#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/ssd_counters.h"

namespace deepinfer::kvstore {


namespace {

uint64_t random_write_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32)};
  uint64_t v;
  do v = rng(); while (v == 0);
  return v;
}

}  // namespace

SsdTier::~SsdTier() = default;

SsdTier::SsdTier(SsdTierOptions options, ErasureCode code)
    : opts_(std::move(options)),
      code_(std::move(code)),
      c_(std::make_unique<Counters>()),
      repair_(std::make_unique<RepairQueue>()) {
  shard_bytes_ = shard_bytes_for(opts_.block_bytes, opts_.data_shards);
  unusable_.assign(opts_.targets.size(), false);
  c_->write_error_logged = std::make_unique<std::atomic<bool>[]>(opts_.targets.size());
}

std::string SsdTier::path_of(const BlockKey& key, int shard) const {
  return shard_path(opts_.targets[placement(key, shard, num_targets())], key, shard);
}

bool SsdTier::exists(const BlockKey& key, int64_t now) const { return expiry_of(key, now) > 0; }

int64_t SsdTier::expiry_of(const BlockKey& key, int64_t now) const {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  int found = 0;
  int64_t expiry = 0;
  for (int i = 0; i < n && found < k; ++i) {
    if (n - i < k - found) return 0;
    struct stat st;
    if (::stat(path_of(key, i).c_str(), &st) == 0 && st.st_mtim.tv_sec > now) {
      ++found;
      expiry = std::max<int64_t>(expiry, st.st_mtim.tv_sec);
    }
  }
  return found >= k ? expiry : 0;
}

void SsdTier::touch(const BlockKey& key, int64_t expiry) const {
  const timespec times[2] = {{expiry, 0}, {expiry, 0}};
  for (int i = 0; i < code_.data_shards() + code_.parity_shards(); ++i) {
    ::utimensat(AT_FDCWD, path_of(key, i).c_str(), times, 0);
  }
}

void SsdTier::remove(const BlockKey& key) const {
  for (int i = 0; i < code_.data_shards() + code_.parity_shards(); ++i) {
    ::unlink(path_of(key, i).c_str());
  }
}

size_t SsdTier::chunk_entries() const {
  // Bounds the scratch images a thread keeps (about 64 MiB) while keeping many I/Os in flight.
  const size_t entry = shard_file_bytes(shard_bytes_) * (code_.data_shards() + code_.parity_shards());
  return std::clamp<size_t>((size_t{64} << 20) / entry, 1, 32);
}

std::vector<ShardImages>& SsdTier::scratch(size_t count) const {
  // Reused per thread: fresh multi-megabyte buffers would be page-faulted in on every call.
  thread_local std::vector<ShardImages> pool;
  const int n = code_.data_shards() + code_.parity_shards();
  if (pool.size() < count) pool.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (pool[i].count() != n || pool[i].shard_bytes() != shard_bytes_) pool[i] = ShardImages(n, shard_bytes_);
  }
  return pool;
}

void SsdTier::put_batch(IoEngine& io, std::span<const PutItem> items, int64_t now,
                        std::vector<bool>* ok) {
  ok->assign(items.size(), false);
  std::vector<bool> part;
  for (size_t b = 0; b < items.size(); b += chunk_entries()) {
    auto chunk = items.subspan(b, std::min(chunk_entries(), items.size() - b));
    put_chunk(io, chunk, now, &part);
    for (size_t j = 0; j < chunk.size(); ++j) (*ok)[b + j] = part[j];
  }
}

int64_t SsdTier::ttl_for(TrafficClass writer, std::optional<TrafficClass> reader) const {
  int64_t ttl = opts_.ttl_seconds[static_cast<int>(writer)];
  if (reader) ttl = std::max(ttl, opts_.ttl_seconds[static_cast<int>(*reader)]);
  return ttl;
}

void SsdTier::get_batch(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                        int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes,
                        std::optional<TrafficClass> reader) {
  hit->assign(keys.size(), false);
  if (classes) classes->assign(keys.size(), TrafficClass::kChat);
  std::vector<bool> part;
  std::vector<TrafficClass> part_classes;
  for (size_t b = 0; b < keys.size(); b += chunk_entries()) {
    size_t len = std::min(chunk_entries(), keys.size() - b);
    get_chunk(io, keys.subspan(b, len), dst.subspan(b, len), now, &part, &part_classes,
              /*for_put=*/false, reader);
    for (size_t j = 0; j < len; ++j) {
      (*hit)[b + j] = part[j];
      if (classes) (*classes)[b + j] = part_classes[j];
    }
  }
}

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

void SsdTier::put_chunk(IoEngine& io, std::span<const PutItem> items, int64_t now,
                        std::vector<bool>* ok) {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  ok->assign(items.size(), false);
  std::vector<bool> replace(items.size(), false), skip(items.size(), false);
  {
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

void SsdTier::get_chunk(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                        int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes,
                        bool for_put, std::optional<TrafficClass> reader) {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  hit->assign(keys.size(), false);
  classes->assign(keys.size(), TrafficClass::kChat);
  std::vector<ShardImages>& images = scratch(keys.size());
  std::vector<std::vector<bool>> present(keys.size(), std::vector<bool>(n, false));
  std::vector<std::vector<size_t>> lens(keys.size(), std::vector<size_t>(n, 0));
  std::vector<std::vector<int64_t>> mtimes(keys.size(), std::vector<int64_t>(n, 0));

  auto read_shards = [&](const std::vector<size_t>& which, int first, int last) {
    std::vector<IoRequest> reqs;
    std::vector<std::pair<size_t, int>> owner;
    for (size_t j : which) {
      for (int i = first; i < last; ++i) {
        IoRequest r;
        int t = placement(keys[j], i, num_targets());
        r.path = shard_path(opts_.targets[t], keys[j], i);
        r.buf = images[j].file(i);
        r.len = images[j].file_bytes();
        r.domain = t;
        reqs.push_back(std::move(r));
        owner.emplace_back(j, i);
      }
    }
    io.read_files(reqs);
    for (size_t r = 0; r < reqs.size(); ++r) {
      auto [j, i] = owner[r];
      present[j][i] = reqs[r].error == 0 && reqs[r].done >= kShardHeaderBytes;
      lens[j][i] = reqs[r].done;
      mtimes[j][i] = reqs[r].mtime_unix;
      c_->bytes_read += reqs[r].done;
    }
  };

  std::vector<size_t> all(keys.size());
  for (size_t j = 0; j < keys.size(); ++j) {
    all[j] = j;
  }
  // Data shards first: the common case needs no parity I/O and no decoding.
  read_shards(all, 0, k);
  std::vector<size_t> degraded;
  std::vector<DecodeOutcome> outcome(keys.size());
  for (size_t j = 0; j < keys.size(); ++j) {
    bool all_data = std::all_of(present[j].begin(), present[j].begin() + k, [](bool b) { return b; });
    if (all_data) {
      outcome[j] = decode_entry(code_, keys[j], opts_.block_bytes, images[j], present[j], lens[j],
                                mtimes[j], dst[j]);
    }
    if (!outcome[j].ok && n > k) degraded.push_back(j);
  }
  if (!degraded.empty()) {
    read_shards(degraded, k, n);
    for (size_t j : degraded) {
      outcome[j] = decode_entry(code_, keys[j], opts_.block_bytes, images[j], present[j], lens[j],
                                mtimes[j], dst[j]);
      if (outcome[j].ok && outcome[j].reconstructed && !for_put) c_->reconstructions++;
      // Every shard was looked at: a lost or corrupt one is queued for background repair.
      const auto& v = outcome[j].valid;
      if (outcome[j].ok && std::count(v.begin(), v.end(), true) < n) note_degraded(keys[j]);
    }
  }
  for (size_t j = 0; j < keys.size(); ++j) {
    const DecodeOutcome& o = outcome[j];
    if (for_put) {
      (*hit)[j] = o.ok && o.max_mtime > now;
      continue;
    }
    c_->corrupt_shards += o.corrupt_shards;
    if (!o.ok) {
      bool any = std::any_of(present[j].begin(), present[j].end(), [](bool b) { return b; });
      if (any) c_->unrecoverable++;
      c_->misses++;
      continue;
    }
    if (o.max_mtime <= now) {
      c_->expired_misses++;
      c_->misses++;
      continue;
    }
    (*hit)[j] = true;
    (*classes)[j] = o.header.traffic_class;
    c_->hits++;
    const int64_t expiry = now + ttl_for(o.header.traffic_class, reader);
    if (expiry - o.max_mtime >= opts_.touch_interval_s) touch(keys[j], expiry);
  }
}

SsdStats SsdTier::stats() const {
  SsdStats s;
  s.entries_written = c_->entries_written;
  s.entries_already_present = c_->entries_already_present;
  s.write_failures = c_->write_failures;
  s.degraded_writes = c_->degraded_writes;
  s.shard_write_errors = c_->shard_write_errors;
  s.hits = c_->hits;
  s.misses = c_->misses;
  s.expired_misses = c_->expired_misses;
  s.corrupt_shards = c_->corrupt_shards;
  s.reconstructions = c_->reconstructions;
  s.unrecoverable = c_->unrecoverable;
  s.bytes_read = c_->bytes_read;
  s.bytes_written = c_->bytes_written;
  s.lost_races = c_->lost_races;
  s.replaced_unreadable = c_->replaced_unreadable;
  s.repaired_entries = c_->repaired_entries;
  s.repaired_shards = c_->repaired_shards;
  s.startup_temps_removed = c_->startup_temps_removed;
  s.unusable_targets = static_cast<uint64_t>(std::count(unusable_.begin(), unusable_.end(), true));
  return s;
}

}  // namespace deepinfer::kvstore
