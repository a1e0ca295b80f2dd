// `deepinfer kvstore stat|verify|gc|rm DIR...`: offline administration of the KV store's SSD
// targets (kvstore/admin.h), as readable tables or JSON. Safe while engines use the targets.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deepinfer/kvstore/admin.h"
#include "deepinfer/tools/cli_common.h"
#include "deepinfer/tools/subcommands.h"

namespace deepinfer::tools {
namespace {

struct KvstoreFlags {
  std::string action;
  std::vector<std::string> dirs;
  bool repair = false;
  uint64_t capacity = 0;
  bool json = false;
  std::vector<std::string> keys;  // rm
};

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

int run_stat(const KvstoreFlags& f) {
  auto r = kvstore::stat_store(f.dirs);
  if (!r.is_ok()) return report_error(r.status());
  const kvstore::StoreStat& s = *r;
  if (f.json) {
    nlohmann::json j;
    for (const auto& t : s.targets)
      j["targets"].push_back({{"path", t.path}, {"present", t.present}, {"bytes", t.bytes},
                              {"shard_files", t.shard_files}, {"temp_files", t.temp_files},
                              {"expired_shards", t.expired_shards}});
    j["entries"] = s.entries;
    for (int c = 0; c < kvstore::kNumTrafficClasses; ++c)
      j["entries_by_class"][std::string(kvstore::traffic_class_name(
          static_cast<kvstore::TrafficClass>(c)))] = s.entries_by_class[c];
    j["entries_by_kind"]["kv_block"] = s.entries_by_kind[0];
    j["entries_by_kind"]["swa_checkpoint"] = s.entries_by_kind[1];
    j["unreadable_headers"] = s.unreadable_headers;
    j["bytes"] = s.bytes;
    j["store_id"] = s.store_id;
    j["degraded_entries"] = s.degraded_entries;
    j["incomplete_entries"] = s.incomplete_entries;
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-40s %8s %12s %12s %8s %8s\n", "target", "present", "bytes", "shard files",
              "temps", "expired");
  for (const auto& t : s.targets)
    std::printf("%-40s %8s %12s %12" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n", t.path.c_str(),
                t.present ? "yes" : "NO", human_bytes(t.bytes).c_str(), t.shard_files,
                t.temp_files, t.expired_shards);
  std::printf("\nentries: %" PRIu64 " (agent %" PRIu64 ", chat %" PRIu64 "), %s on disk",
              s.entries, s.entries_by_class[0], s.entries_by_class[1], human_bytes(s.bytes).c_str());
  if (s.entries_by_kind[1] > 0)
    std::printf("; %" PRIu64 " of them sliding-window checkpoint parts", s.entries_by_kind[1]);
  if (s.unreadable_headers > 0) std::printf(", %" PRIu64 " unreadable headers", s.unreadable_headers);
  std::printf("\n%" PRIu64 " degraded (awaiting repair), %" PRIu64 " incomplete (never readable)\n",
              s.degraded_entries, s.incomplete_entries);
  if (!s.store_id.empty()) std::printf("store id %s\n", s.store_id.c_str());
  return kExitOk;
}

int run_verify(const KvstoreFlags& f) {
  kvstore::VerifyOptions opts;
  opts.repair = f.repair;
  opts.delete_unrecoverable = f.repair;  // they can never be read again; a later put rewrites them
  auto r = kvstore::verify_store(f.dirs, opts);
  if (!r.is_ok()) return report_error(r.status());
  const kvstore::VerifyReport& v = *r;
  if (f.json) {
    nlohmann::json j = {{"entries", v.entries},
                        {"healthy", v.healthy},
                        {"degraded", v.degraded},
                        {"repaired_entries", v.repaired_entries},
                        {"repaired_shards", v.repaired_shards},
                        {"unrecoverable", v.unrecoverable},
                        {"incomplete", v.incomplete},
                        {"foreign", v.foreign},
                        {"manifests_written", v.manifests_written},
                        {"deleted", v.deleted},
                        {"missing_shards", v.missing_shards},
                        {"corrupt_shards", v.corrupt_shards},
                        {"problems", v.problems}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%-18s %12s\n", "entries", "count");
    const std::pair<const char*, uint64_t> rows[] = {
        {"checked", v.entries},          {"healthy", v.healthy},
        {"degraded", v.degraded},        {"repaired", v.repaired_entries},
        {"unrecoverable", v.unrecoverable}, {"deleted", v.deleted},
        {"incomplete", v.incomplete},    {"other target count", v.foreign}};
    for (const auto& [name, n] : rows) std::printf("%-18s %12" PRIu64 "\n", name, n);
    std::printf("\nshards: %" PRIu64 " missing, %" PRIu64 " corrupt, %" PRIu64 " rewritten\n",
                v.missing_shards, v.corrupt_shards, v.repaired_shards);
    for (const std::string& p : v.problems) std::printf("  %s\n", p.c_str());
  }
  // Exit 1 when something is still wrong afterwards: fsck-like, so scripts can alert.
  const bool unfixed_degraded = !f.repair && v.degraded > 0;
  return (v.unrecoverable > v.deleted || unfixed_degraded) ? kExitRuntimeError : kExitOk;
}

int run_gc(const KvstoreFlags& f) {
  kvstore::GcOptions opts;
  opts.target_capacity_bytes = f.capacity;
  auto r = kvstore::gc_store(f.dirs, opts);
  if (!r.is_ok()) return report_error(r.status());
  const kvstore::GcReport& g = *r;
  if (f.json) {
    nlohmann::json j = {{"expired_entries", g.expired_entries}, {"evicted_entries", g.evicted_entries},
                        {"orphan_entries", g.orphan_entries},   {"stale_temps", g.stale_temps},
                        {"foreign_entries", g.foreign_entries},
                        {"files_removed", g.files_removed},     {"bytes_freed", g.bytes_freed}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-18s %12s\n", "removed", "count");
  const std::pair<const char*, uint64_t> rows[] = {{"expired entries", g.expired_entries},
                                                   {"evicted entries", g.evicted_entries},
                                                   {"orphan entries", g.orphan_entries},
                                                   {"kept: other count", g.foreign_entries},
                                                   {"stale temp files", g.stale_temps},
                                                   {"files", g.files_removed}};
  for (const auto& [name, n] : rows) std::printf("%-18s %12" PRIu64 "\n", name, n);
  std::printf("\nfreed %s\n", human_bytes(g.bytes_freed).c_str());
  return kExitOk;
}

int run_rm(const KvstoreFlags& f) {
  if (f.keys.empty()) {
    std::fprintf(stderr, "deepinfer kvstore rm: give the entries to remove with --key HEX\n");
    return kExitUsage;
  }
  auto r = kvstore::remove_entries(f.dirs, f.keys);
  if (!r.is_ok()) return report_error(r.status());
  if (f.json) {
    std::printf("%s\n", nlohmann::json({{"shard_files_removed", *r}}).dump(2).c_str());
  } else {
    std::printf("removed %" PRIu64 " shard files\n", *r);
  }
  return kExitOk;
}

}  // namespace

Subcommand make_kvstore_command() {
  auto f = std::make_shared<KvstoreFlags>();
  Subcommand s;
  s.add = [f](CLI::App& app) {
    CLI::App* cmd = app.add_subcommand(
        "kvstore",
        "Inspect (stat), check/repair (verify), clean (gc) or remove entries from (rm) KV store "
        "target dirs");
    cmd->add_option("action", f->action, "stat | verify | gc | rm")
        ->required()
        ->check(CLI::IsMember({"stat", "verify", "gc", "rm"}));
    cmd->add_option("dirs", f->dirs, "Target directories, in the order the engines use")
        ->required();
    cmd->add_flag("--repair", f->repair,
                  "verify: rewrite lost or corrupt shards from survivors, delete entries that can "
                  "never be read, and join replaced (empty) targets to the store");
    cmd->add_option("--key", f->keys, "rm: an entry's 64-hex key (repeatable: --key A --key B)")
        ->allow_extra_args(false);  // one value per --key: the directories follow
    cmd->add_option("--capacity", f->capacity,
                    "gc: also evict soonest-to-expire entries beyond this many bytes per target "
                    "(suffixes K, M, G, T; powers of 1024)")
        ->transform(CLI::AsSizeValue(false));
    cmd->add_flag("--json", f->json, "Print JSON instead of tables");
    return cmd;
  };
  s.run = [f] {
    // Flags that do not belong to the action are usage errors, not silently ignored.
    const char* misplaced = f->repair && f->action != "verify" ? "--repair only applies to verify"
                            : f->capacity != 0 && f->action != "gc" ? "--capacity only applies to gc"
                            : !f->keys.empty() && f->action != "rm" ? "--key only applies to rm"
                                                                    : nullptr;
    if (misplaced != nullptr) {
      std::fprintf(stderr, "deepinfer kvstore: %s\n", misplaced);
      return kExitUsage;
    }
    if (f->action == "stat") return run_stat(*f);
    if (f->action == "verify") return run_verify(*f);
    if (f->action == "rm") return run_rm(*f);
    return run_gc(*f);
  };
  return s;
}

}  // namespace deepinfer::tools
