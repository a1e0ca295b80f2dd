// stat / verify / gc over target directories, driven by a scan of the shard files.
#include "deepinfer/kvstore/admin.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/entry_io.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/manifest.h"
#include "deepinfer/kvstore/shard_format.h"

namespace deepinfer::kvstore {
namespace {

constexpr size_t kMaxProblems = 20;
constexpr int64_t kStaleTempSeconds = 3600;

struct ShardFile {
  int target = 0;
  int shard = 0;
  std::string path;
  uint64_t size = 0;
  int64_t mtime = 0;
  int64_t ctime = 0;
};

struct Scan {
  std::vector<TargetUsage> usage;
  std::map<BlockKey, std::vector<ShardFile>> entries;
  std::vector<ShardFile> temps;  // shard = -1
};

int64_t real_now() { return static_cast<int64_t>(::time(nullptr)); }

Result<Scan> scan(const std::vector<std::string>& targets) {
  if (targets.empty()) return invalid_argument("kvstore: no target directories given");
  Scan s;
  for (int t = 0; t < static_cast<int>(targets.size()); ++t) {
    TargetUsage u;
    u.path = targets[t];
    struct stat st;
    u.present = ::stat(targets[t].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    const std::string root = targets[t] + "/" + kLayoutDir;
    for (int b = 0; u.present && b < 256; ++b) {
      std::string sub = fmt::format("{}/{:02x}", root, b);
      DIR* d = ::opendir(sub.c_str());
      if (!d) continue;
      while (dirent* e = ::readdir(d)) {
        std::string_view name = e->d_name;
        if (name == "." || name == "..") continue;
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        ShardFile f{t, -1, sub + "/" + e->d_name, static_cast<uint64_t>(st.st_size),
                    st.st_mtim.tv_sec, st.st_ctim.tv_sec};
        BlockKey key;
        std::string host;
        long pid;
        if (parse_shard_name(name, &key, &f.shard)) {
          u.shard_files++;
          u.bytes += f.size;
          s.entries[key].push_back(std::move(f));
        } else if (parse_temp_name(name, &host, &pid)) {
          u.temp_files++;
          s.temps.push_back(std::move(f));
        }
      }
      ::closedir(d);
    }
    s.usage.push_back(std::move(u));
  }
  return s;
}

// The shard file's header, when the file can be read and its header parses.
std::optional<ShardHeader> read_header(const ShardFile& f) {
  uint8_t buf[kShardHeaderBytes];
  int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(buf))) return std::nullopt;
  auto h = parse_shard_header(buf, sizeof(buf), f.path.c_str());
  if (!h.is_ok()) return std::nullopt;
  return *h;
}

// The header of the first shard file that has a valid one.
std::optional<ShardHeader> read_any_header(const std::vector<ShardFile>& files) {
  for (const ShardFile& f : files) {
    if (auto h = read_header(f)) return h;
  }
  return std::nullopt;
}

uint64_t unlink_all(const std::vector<ShardFile>& files, std::vector<TargetUsage>* usage,
                    uint64_t* bytes_freed) {
  uint64_t n = 0;
  for (const ShardFile& f : files) {
    if (::unlink(f.path.c_str()) != 0) continue;
    ++n;
    if (bytes_freed) *bytes_freed += f.size;
    if (usage) (*usage)[f.target].bytes -= std::min((*usage)[f.target].bytes, f.size);
  }
  return n;
}

void note(VerifyReport* r, std::string msg) {
  if (r->problems.size() < kMaxProblems) r->problems.push_back(std::move(msg));
}

// verify/gc/rm act on the whole store only: every target present, in the manifest's order.
Result<ManifestCheck> check_store(const std::vector<std::string>& targets) {
  if (targets.empty()) return invalid_argument("kvstore: no target directories given");
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_manifests(targets));
  for (size_t t = 0; t < targets.size(); ++t) {
    if (mc.state[t] == TargetState::kMissing) {
      return io_error("kvstore target {}: {} (give every target of the store, in order; for a lost "
                      "one, an empty directory in its place, then `kvstore verify --repair`)",
                      targets[t], mc.why[t]);
    }
  }
  return mc;
}

// Intact shard headers of one entry, by write: the largest group decides whether it can decode.
struct HeaderVotes {
  int best = 0;            // intact headers of the best-represented write
  int num_targets = -1;    // from any intact header
  int data_shards = 0;
};

HeaderVotes count_headers(const BlockKey& key, const std::vector<ShardFile>& files) {
  HeaderVotes v;
  std::map<uint64_t, int> votes;
  for (const ShardFile& f : files) {
    auto h = read_header(f);
    if (!h || h->key != key || h->shard_index != f.shard) continue;
    v.num_targets = h->num_targets;
    v.data_shards = h->data_shards;
    v.best = std::max(v.best, ++votes[h->write_id]);
  }
  return v;
}

}  // namespace

Result<StoreStat> stat_store(const std::vector<std::string>& targets, int64_t now) {
  if (now == 0) now = real_now();
  if (targets.empty()) return invalid_argument("kvstore: no target directories given");
  // Reports missing targets rather than refusing them, but not a list of another store.
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_manifests(targets));
  DI_ASSIGN_OR_RETURN(Scan s, scan(targets));
  StoreStat out;
  if (mc.store) out.store_id = mc.store->store_id;
  for (auto& [key, files] : s.entries) {
    out.entries++;
    for (const ShardFile& f : files) {
      if (f.mtime <= now) s.usage[f.target].expired_shards++;
    }
    auto h = read_any_header(files);
    if (h) {
      const int present = static_cast<int>(files.size());
      if (present < h->data_shards) {
        out.incomplete_entries++;
      } else if (present < h->data_shards + h->parity_shards) {
        out.degraded_entries++;
      }
      out.entries_by_class[static_cast<int>(h->traffic_class)]++;
      out.entries_by_kind[static_cast<int>(h->kind)]++;
    } else {
      out.unreadable_headers++;
    }
  }
  for (const TargetUsage& u : s.usage) out.bytes += u.bytes;
  out.targets = std::move(s.usage);
  return out;
}

Result<VerifyReport> verify_store(const std::vector<std::string>& targets,
                                  const VerifyOptions& options) {
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_store(targets));
  VerifyReport r;
  if (options.repair && mc.store) {
    for (size_t t = 0; t < targets.size(); ++t) {
      if (mc.state[t] != TargetState::kNoManifest) continue;
      StoreManifest m = *mc.store;
      m.position = static_cast<int>(t);
      DI_RETURN_IF_ERROR(write_manifest(targets[t], m));
      r.manifests_written++;
    }
  }
  DI_ASSIGN_OR_RETURN(Scan s, scan(targets));
  const int num_targets = static_cast<int>(targets.size());
  const int64_t wall = real_now();
  std::map<std::pair<int, int>, std::unique_ptr<ErasureCode>> codes;
  IoEngine io(options.io_mode, options.direct_io, num_targets);
  for (auto& [key, files] : s.entries) {
    r.entries++;
    int64_t newest = 0;
    for (const ShardFile& f : files) newest = std::max(newest, f.ctime);
    const bool settled = newest + options.grace_s < wall;
    auto h = read_any_header(files);
    if (h && h->num_targets != num_targets) {
      r.foreign++;
      note(&r, fmt::format("entry {}: written for {} targets, {} given: not checked", to_hex(key),
                           h->num_targets, num_targets));
      continue;
    }
    if (h && static_cast<int>(files.size()) < h->data_shards) {
      // Never visible to readers (they need k shard files): a writer killed while publishing.
      r.incomplete++;
      continue;
    }
    if (!h) {
      r.unrecoverable++;
      note(&r, fmt::format("entry {}: unrecoverable (0 of {} shard files have an intact header)",
                           to_hex(key), files.size()));
      if (options.delete_unrecoverable && settled && unlink_all(files, nullptr, nullptr) > 0) r.deleted++;
      continue;
    }
    const int k = h->data_shards, m = h->parity_shards, n = k + m;
    auto& code = codes[{k, m}];
    if (!code) code = std::make_unique<ErasureCode>(std::move(ErasureCode::create(k, m).value()));
    ShardImages images(n, h->shard_bytes);
    const EntryShardReads got = read_entry_shards(io, targets, key, images);
    r.missing_shards += got.missing;
    std::vector<uint8_t> block(h->block_bytes);
    DecodeOutcome o =
        decode_entry(*code, key, h->block_bytes, images, got.present, got.lens, got.mtimes, block.data());
    r.corrupt_shards += o.corrupt_shards;
    if (!o.ok) {
      r.unrecoverable++;
      note(&r, fmt::format("entry {}: unrecoverable ({} of {} shards intact{}, need {})", to_hex(key),
                           o.intact_shards, n,
                           o.writes_seen > 1 ? fmt::format(" in one write; {} writes mixed", o.writes_seen)
                                             : std::string(),
                           k));
      if (options.delete_unrecoverable && settled && unlink_all(files, nullptr, nullptr) > 0) r.deleted++;
      continue;
    }
    std::vector<int> bad;
    for (int i = 0; i < n; ++i) {
      if (!o.valid[i]) bad.push_back(i);
    }
    if (bad.empty()) {
      r.healthy++;
      continue;
    }
    r.degraded++;
    note(&r, fmt::format("entry {}: {} of {} shards lost or corrupt", to_hex(key), bad.size(), n));
    if (!options.repair) continue;
    const int fixed = rewrite_entry_shards(io, targets, key, *code, o, block.data(), bad, /*sync=*/true);
    r.repaired_shards += fixed;
    if (fixed == static_cast<int>(bad.size())) r.repaired_entries++;
  }
  return r;
}

Result<GcReport> gc_store(const std::vector<std::string>& targets, const GcOptions& options) {
  const int64_t now = options.now ? options.now : real_now();
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_store(targets));
  (void)mc;
  // Hold every target's sweep lock (in list order) so engine sweepers stand aside meanwhile.
  std::vector<int> locks;
  for (const std::string& t : targets) {
    int fd = ::open((t + "/" + kLayoutDir + "/.sweep.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && ::flock(fd, LOCK_EX) != 0) {
      ::close(fd);
      fd = -1;
    }
    locks.push_back(fd);
  }
  struct Unlock {
    std::vector<int>& fds;
    ~Unlock() {
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
    }
  } unlock{locks};
  DI_ASSIGN_OR_RETURN(Scan s, scan(targets));
  GcReport r;
  const int64_t wall = real_now();
  for (const ShardFile& f : s.temps) {
    std::string host;
    long pid = 0;
    parse_temp_name(f.path.substr(f.path.rfind('/') + 1), &host, &pid);
    bool dead = host == host_tag() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if ((dead || f.ctime + kStaleTempSeconds < wall) && ::unlink(f.path.c_str()) == 0) {
      r.stale_temps++;
      r.files_removed++;
      r.bytes_freed += f.size;
    }
  }
  std::vector<std::pair<int64_t, const BlockKey*>> live;
  for (auto it = s.entries.begin(); it != s.entries.end();) {
    const std::vector<ShardFile>& files = it->second;
    int64_t max_mtime = 0, max_ctime = 0;
    for (const ShardFile& f : files) {
      max_mtime = std::max(max_mtime, f.mtime);
      max_ctime = std::max(max_ctime, f.ctime);
    }
    bool remove = false;
    if (max_mtime <= now) {
      remove = true;
      r.expired_entries++;
    } else if (max_ctime + options.orphan_grace_s < wall) {
      // Garbage only when provably unreadable with this (manifest-checked, complete) target
      // list: fewer than k intact shards of any one write. Entries written for another target
      // count are not ours to judge.
      const HeaderVotes v = count_headers(it->first, files);
      if (v.num_targets >= 0 && v.num_targets != static_cast<int>(targets.size())) {
        r.foreign_entries++;
      } else if (v.num_targets < 0 || v.best < v.data_shards) {
        remove = true;
        r.orphan_entries++;
      }
    }
    if (remove) {
      r.files_removed += unlink_all(files, &s.usage, &r.bytes_freed);
      it = s.entries.erase(it);
    } else {
      live.emplace_back(max_mtime, &it->first);
      ++it;
    }
  }
  if (options.target_capacity_bytes > 0) {
    std::sort(live.begin(), live.end());
    for (const auto& [expiry, key] : live) {
      const std::vector<ShardFile>& files = s.entries[*key];
      bool over = false;
      for (const ShardFile& f : files) over |= s.usage[f.target].bytes > options.target_capacity_bytes;
      if (!over) continue;
      r.files_removed += unlink_all(files, &s.usage, &r.bytes_freed);
      r.evicted_entries++;
    }
  }
  return r;
}

Result<uint64_t> remove_entries(const std::vector<std::string>& targets,
                                const std::vector<std::string>& hex_keys) {
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_store(targets));
  (void)mc;
  std::vector<BlockKey> keys;
  for (const std::string& hex : hex_keys) {
    BlockKey key;
    if (!from_hex(hex, &key)) return invalid_argument("kvstore rm: '{}' is not a 64-hex-digit key", hex);
    keys.push_back(key);
  }
  const int n = static_cast<int>(targets.size());
  uint64_t removed = 0;
  for (const BlockKey& key : keys) {
    // Every slot on every target: the entry may have been written with any k+m.
    for (int i = 0; i < n; ++i) {
      if (::unlink(shard_path(targets[placement(key, i, n)], key, i).c_str()) == 0) ++removed;
    }
  }
  return removed;
}

}  // namespace deepinfer::kvstore
