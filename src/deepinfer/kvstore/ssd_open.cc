// SsdTier::open: option checks, the store manifest (issue #30: a target list that does not match
// the store is refused), tolerance of up to m unusable targets, and removal of crashed writers'
// temp files at start-up.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "deepinfer/base/log.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/manifest.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/ssd_counters.h"
#include "deepinfer/kvstore/ssd_tier.h"

namespace deepinfer::kvstore {
namespace {

Status check_options(const SsdTierOptions& o) {
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
  return Status::ok();
}

// A target we can create files in: probe with a file of our own.
std::string probe_writable(const std::string& target) {
  const std::string probe = fmt::format("{}/{}/.probe.{}.{}", target, kLayoutDir, host_tag(), ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot create files: {}", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

// More unusable targets than parity shards: entries could not be read or written.
Status check_unusable(const SsdTierOptions& o, const std::vector<std::string>& why) {
  int unusable = 0;
  std::string list;
  for (size_t t = 0; t < why.size(); ++t) {
    if (why[t].empty()) continue;
    ++unusable;
    list += fmt::format("; {}: {}", o.targets[t], why[t]);
  }
  if (unusable <= o.parity_shards) return Status::ok();
  return io_error("kvstore: {} of {} targets unusable, {}+{} coding tolerates {}{}", unusable,
                  why.size(), o.data_shards, o.parity_shards, o.parity_shards, list);
}

}  // namespace

Result<std::unique_ptr<SsdTier>> SsdTier::open(SsdTierOptions o) {
  DI_RETURN_IF_ERROR(check_distinct_targets(o.targets));
  for (const std::string& t : o.targets) {
    ::mkdir(t.c_str(), 0755);  // failures show up as missing targets below
    ::mkdir((t + "/" + kLayoutDir).c_str(), 0755);
  }
  DI_ASSIGN_OR_RETURN(ManifestCheck mc, check_manifests(o.targets));
  if (mc.store) {
    if (o.coding_from_manifest) {
      o.data_shards = mc.store->data_shards;
      o.parity_shards = mc.store->parity_shards;
    } else if (o.data_shards != mc.store->data_shards || o.parity_shards != mc.store->parity_shards) {
      return invalid_argument("kvstore: the store on these targets uses {}+{} coding, {}+{} asked",
                              mc.store->data_shards, mc.store->parity_shards, o.data_shards,
                              o.parity_shards);
    }
  }
  DI_RETURN_IF_ERROR(check_options(o));
  const int n = static_cast<int>(o.targets.size());
  std::vector<std::string> why = mc.why;
  for (int t = 0; t < n; ++t) {
    if (mc.state[t] != TargetState::kMissing) why[t] = probe_writable(o.targets[t]);
  }
  DI_RETURN_IF_ERROR(check_unusable(o, why));
  if (!mc.store) {
    // Several processes may create the store at the same moment. The first usable target
    // decides: write_manifest publishes with link(), first writer wins, so every creator reads
    // the winner's store id back from there and writes that one to the other targets (a mix of
    // ids across targets would be refused as "different stores").
    StoreManifest m{new_store_id(), n, 0, o.data_shards, o.parity_shards};
    for (int t = 0; t < n && !mc.store; ++t) {
      if (!why[t].empty()) continue;
      m.position = t;
      if (Status s = write_manifest(o.targets[t], m); !s.is_ok()) {
        why[t] = s.message();
        continue;
      }
      DI_ASSIGN_OR_RETURN(mc, check_manifests(o.targets));
    }
    if (!mc.store) return io_error("kvstore: no target could hold the store manifest");
    if (mc.store->data_shards != o.data_shards || mc.store->parity_shards != o.parity_shards) {
      return invalid_argument("kvstore: another process created the store on these targets with "
                              "{}+{} coding at the same moment, {}+{} asked",
                              mc.store->data_shards, mc.store->parity_shards, o.data_shards,
                              o.parity_shards);
    }
  }
  for (int t = 0; t < n; ++t) {
    if (!why[t].empty() || mc.state[t] != TargetState::kNoManifest) continue;
    StoreManifest m = *mc.store;
    m.position = t;  // the other targets of a new store, or a replaced (empty) disk in its slot
    if (Status s = write_manifest(o.targets[t], m); !s.is_ok()) why[t] = s.message();
  }
  DI_RETURN_IF_ERROR(check_unusable(o, why));
  int unusable = 0;
  for (int t = 0; t < n; ++t) unusable += !why[t].empty();
  DI_ASSIGN_OR_RETURN(ErasureCode code, ErasureCode::create(o.data_shards, o.parity_shards));
  std::unique_ptr<SsdTier> tier(new SsdTier(std::move(o), std::move(code)));
  tier->store_id_ = mc.store->store_id;
  for (int t = 0; t < n; ++t) {
    if (why[t].empty()) continue;
    tier->unusable_[t] = true;
    log::warn("kvstore target {} unusable ({}); serving from the other {} targets ({} more may "
              "fail before entries are lost)", tier->opts_.targets[t], why[t], n - unusable,
              tier->opts_.parity_shards - unusable);
  }
  tier->remove_dead_temps();
  return tier;
}

void SsdTier::remove_dead_temps() {
  SweepReport r;
  for (int t = 0; t < num_targets(); ++t) {
    if (!unusable_[t]) sweep_target(t, /*now=*/0, &r, /*temps_only=*/true);
  }
  c_->startup_temps_removed += r.stale_temps;
  if (r.stale_temps > 0) log::info("kvstore: removed {} temp files of crashed writers", r.stale_temps);
}

}  // namespace deepinfer::kvstore
