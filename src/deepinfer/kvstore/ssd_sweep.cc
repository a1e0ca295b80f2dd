// SsdTier's sweeper: expiry, dead writers' temps and capacity eviction for one target at a
// time, under that target's flock so concurrent processes never sweep the same target twice.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include <fmt/format.h>

#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/ssd_tier.h"

namespace deepinfer::kvstore {
namespace {
constexpr int64_t kStaleTempSeconds = 3600;  // temps of writers on other hosts
constexpr int64_t kStaleLockSeconds = 600;   // a replace takes milliseconds
}  // namespace

SweepReport SsdTier::sweep(int64_t now) {
  SweepReport report;
  for (int t = 0; t < num_targets(); ++t) sweep_target(t, now, &report);
  if (opts_.repair_per_sweep > 0) {
    IoEngine io(opts_.io_mode, opts_.direct_io, num_targets());
    repair_some(io, now, &report);
  }
  return report;
}

// temps_only: the start-up pass (crashed writers' temps; nothing else is touched).
void SsdTier::sweep_target(int t, int64_t now, SweepReport* report, bool temps_only) {
  const std::string root = opts_.targets[t] + "/" + kLayoutDir;
  const std::string lock_path = root + "/.sweep.lock";
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return;  // target gone: nothing to sweep
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    report->targets_busy++;
    ::close(lock_fd);
    return;
  }
  struct Live {
    int64_t expiry;
    uint64_t bytes;
    BlockKey key;
  };
  std::vector<Live> live;
  std::vector<BlockKey> expired;
  uint64_t usage = 0;
  const int64_t real_now = static_cast<int64_t>(::time(nullptr));
  for (int b = 0; b < 256; ++b) {
    std::string sub = fmt::format("{}/{:02x}", root, b);
    DIR* d = ::opendir(sub.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      std::string host;
      long pid = 0;
      BlockKey key;
      int shard = 0;
      if (parse_temp_name(name, &host, &pid)) {
        bool dead = host == host_tag() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
        if (dead || st.st_ctim.tv_sec + kStaleTempSeconds < real_now) {
          if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) report->stale_temps++;
        }
      } else if (name.starts_with(".replace.")) {
        // A replacing writer's lock left by a crash.
        if (st.st_ctim.tv_sec + kStaleLockSeconds < real_now) ::unlinkat(::dirfd(d), e->d_name, 0);
      } else if (temps_only) {
        continue;
      } else if (parse_shard_name(name, &key, &shard)) {
        if (st.st_mtim.tv_sec <= now) {
          expired.push_back(key);
        } else {
          live.push_back({st.st_mtim.tv_sec, static_cast<uint64_t>(st.st_size), key});
          usage += static_cast<uint64_t>(st.st_size);
        }
      }
    }
    ::closedir(d);
  }
  std::sort(expired.begin(), expired.end());
  expired.erase(std::unique(expired.begin(), expired.end()), expired.end());
  for (const BlockKey& key : expired) {
    remove(key);
    report->expired_entries++;
  }
  if (opts_.target_capacity_bytes > 0 && usage > opts_.target_capacity_bytes) {
    // Soonest expiry first: within a class that is least recently used; across classes the
    // entry with the least lifetime left goes first.
    std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) {
      return a.expiry != b.expiry ? a.expiry < b.expiry : a.key < b.key;
    });
    for (const Live& l : live) {
      if (usage <= opts_.target_capacity_bytes) break;
      remove(l.key);
      usage -= l.bytes;
      report->evicted_entries++;
    }
  }
  ::close(lock_fd);
}

}  // namespace deepinfer::kvstore
