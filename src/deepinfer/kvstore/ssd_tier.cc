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
