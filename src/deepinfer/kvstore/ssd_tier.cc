// SSD tier: batched erasure-coded puts and gets, expiry in mtime (sweeping: ssd_sweep.cc).
#include "deepinfer/kvstore/ssd_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <unordered_set>

#include <fmt/format.h>

#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/shard_format.h"

namespace deepinfer::kvstore {

struct SsdTier::Counters {
  std::atomic<uint64_t> entries_written{0}, entries_already_present{0}, write_failures{0},
      degraded_writes{0}, shard_write_errors{0}, hits{0}, misses{0}, expired_misses{0},
      corrupt_shards{0}, reconstructions{0}, unrecoverable{0}, bytes_read{0}, bytes_written{0};
};

namespace {

uint64_t random_write_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32)};
  uint64_t v;
  do v = rng(); while (v == 0);
  return v;
}

}  // namespace

Result<std::unique_ptr<SsdTier>> SsdTier::open(SsdTierOptions o) {
  const int n = o.data_shards + o.parity_shards;
  if (o.targets.empty()) return invalid_argument("kvstore: no SSD targets given");
  if (static_cast<int>(o.targets.size()) < n) {
    return invalid_argument("kvstore: {}+{} erasure coding needs at least {} targets, got {}",
                            o.data_shards, o.parity_shards, n, o.targets.size());
  }
  if (o.targets.size() > 65535) return invalid_argument("kvstore: too many targets");
  if (o.block_bytes == 0) return invalid_argument("kvstore: block_bytes must be > 0");
  if (shard_bytes_for(o.block_bytes, std::max(o.data_shards, 1)) > (1u << 31)) {
    return invalid_argument("kvstore: block_bytes {} too large", o.block_bytes);
  }
  for (int c = 0; c < kNumTrafficClasses; ++c) {
    if (o.ttl_seconds[c] <= 0) return invalid_argument("kvstore: TTL of class {} must be > 0", c);
  }
  DI_ASSIGN_OR_RETURN(ErasureCode code, ErasureCode::create(o.data_shards, o.parity_shards));
  for (const std::string& t : o.targets) {
    if (::mkdir(t.c_str(), 0755) != 0 && errno != EEXIST) {
      return io_error("kvstore target {}: cannot create: {}", t, std::strerror(errno));
    }
    std::string root = t + "/" + kLayoutDir;
    if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
      return io_error("kvstore target {}: cannot create {}: {}", t, root, std::strerror(errno));
    }
  }
  return std::unique_ptr<SsdTier>(new SsdTier(std::move(o), std::move(code)));
}

SsdTier::~SsdTier() = default;

SsdTier::SsdTier(SsdTierOptions options, ErasureCode code)
    : opts_(std::move(options)), code_(std::move(code)), c_(std::make_unique<Counters>()) {
  shard_bytes_ = shard_bytes_for(opts_.block_bytes, opts_.data_shards);
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

void SsdTier::get_batch(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                        int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes) {
  hit->assign(keys.size(), false);
  if (classes) classes->assign(keys.size(), TrafficClass::kChat);
  std::vector<bool> part;
  std::vector<TrafficClass> part_classes;
  for (size_t b = 0; b < keys.size(); b += chunk_entries()) {
    size_t len = std::min(chunk_entries(), keys.size() - b);
    get_chunk(io, keys.subspan(b, len), dst.subspan(b, len), now, &part, &part_classes);
    for (size_t j = 0; j < len; ++j) {
      (*hit)[b + j] = part[j];
      if (classes) (*classes)[b + j] = part_classes[j];
    }
  }
}

void SsdTier::put_chunk(IoEngine& io, std::span<const PutItem> items, int64_t now,
                        std::vector<bool>* ok) {
  const int k = code_.data_shards(), n = k + code_.parity_shards();
  ok->assign(items.size(), false);
  std::vector<ShardImages>& images = scratch(items.size());
  std::vector<bool> encoded(items.size(), false);
  std::vector<IoRequest> reqs;
  std::vector<std::pair<size_t, int>> owner;  // reqs index -> (item, shard)
  for (size_t j = 0; j < items.size(); ++j) {
    const PutItem& it = items[j];
    const int64_t expiry = now + opts_.ttl_seconds[static_cast<int>(it.traffic_class)];
    if (int64_t until = expiry_of(it.key, now); until > 0) {
      // Same key = same prefix = same bytes: refresh instead of racing a second copy in (and
      // never shorten a longer-lived class's expiry).
      if (expiry > until) touch(it.key, expiry);
      (*ok)[j] = true;
      c_->entries_already_present++;
      continue;
    }
    encoded[j] = true;
    ShardHeader proto;
    proto.key = it.key;
    proto.write_id = random_write_id();
    proto.block_bytes = opts_.block_bytes;
    proto.num_targets = static_cast<uint16_t>(num_targets());
    proto.traffic_class = it.traffic_class;
    proto.created_unix = now;
    encode_entry(code_, proto, it.data, images[j]);
    for (int i = 0; i < n; ++i) {
      IoRequest r;
      int t = placement(it.key, i, num_targets());
      r.path = temp_shard_path(opts_.targets[t], it.key, i);
      r.buf = images[j].file(i);
      r.len = images[j].file_bytes();
      r.domain = t;
      r.mtime_unix = expiry;
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
    if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) {
      retry.push_back(reqs[r]);
      retry_idx.push_back(r);
    }
  }
  if (!retry.empty()) {
    io.write_files(retry, opts_.sync_writes);
    for (size_t r = 0; r < retry.size(); ++r) reqs[retry_idx[r]] = std::move(retry[r]);
  }
  std::vector<int> written(items.size(), 0);
  for (size_t r = 0; r < reqs.size(); ++r) {
    if (reqs[r].error == 0) {
      written[owner[r].first]++;
    } else {
      c_->shard_write_errors++;
    }
  }
  for (size_t r = 0; r < reqs.size(); ++r) {
    const auto [j, shard] = owner[r];
    if (reqs[r].error != 0) continue;
    if (written[j] < k) {
      ::unlink(reqs[r].path.c_str());
      continue;
    }
    if (::rename(reqs[r].path.c_str(), path_of(items[j].key, shard).c_str()) != 0) {
      ::unlink(reqs[r].path.c_str());
      c_->shard_write_errors++;
      written[j]--;
    } else {
      c_->bytes_written += reqs[r].len;
    }
  }
  for (size_t j = 0; j < items.size(); ++j) {
    if (!encoded[j]) continue;
    if (written[j] >= k) {
      (*ok)[j] = true;
      c_->entries_written++;
      if (written[j] < n) c_->degraded_writes++;
    } else {
      c_->write_failures++;
    }
  }
}

void SsdTier::get_chunk(IoEngine& io, std::span<const BlockKey> keys, std::span<uint8_t* const> dst,
                        int64_t now, std::vector<bool>* hit, std::vector<TrafficClass>* classes) {
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
      if (outcome[j].ok && outcome[j].reconstructed) c_->reconstructions++;
    }
  }
  for (size_t j = 0; j < keys.size(); ++j) {
    const DecodeOutcome& o = outcome[j];
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
    const int64_t expiry = now + opts_.ttl_seconds[static_cast<int>(o.header.traffic_class)];
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
  return s;
}

}  // namespace deepinfer::kvstore
