#include "deepinfer/tools/bench_kvstore_io.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <span>

#include <nlohmann/json.hpp>

#include "deepinfer/base/timer.h"
#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/io_engine.h"
#include "deepinfer/kvstore/key.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/shard_format.h"
#include "deepinfer/kvstore/ssd_tier.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {
namespace {

constexpr int kDataShards = 10;
constexpr int kShards = 12;  // 10 data + 2 parity, one per target
constexpr int kBatch = 32;   // blocks per put_batch / get_batch, as the engine's tier batches

// A fresh directory that is removed with everything in it when the bench ends.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent) {
    std::string tmpl = parent + "/deepinfer_kvstore_bench_XXXXXX";
    if (char* p = ::mkdtemp(tmpl.data())) path_ = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

kvstore::BlockKey bench_key(uint64_t i) {
  kvstore::BlockKey parent{};
  const uint64_t salt = 0x6b7662656e6368;  // "kvbench"
  std::memcpy(parent.data(), &salt, sizeof salt);
  const int32_t tokens[2] = {static_cast<int32_t>(i), static_cast<int32_t>(i >> 32)};
  return kvstore::chain_key(parent, tokens);
}

void fill_block(uint64_t seed, std::vector<uint8_t>& block) {
  uint64_t s = seed | 1;
  for (size_t i = 0; i < block.size(); i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(block.data() + i, &s, std::min<size_t>(8, block.size() - i));
  }
}

}  // namespace

int run_kvstore_io_bench(const KvStoreIoBenchOptions& opts) {
  if (!opts.dirs.empty() && opts.dirs.size() != 1 && opts.dirs.size() != kShards)
    return report_error(invalid_argument("bench --mode kvstore-io: give no --kv-store (a temporary directory), "
                                         "one (12 targets inside it) or 12, not {}", opts.dirs.size()));
  const char* tmp = std::getenv("TMPDIR");
  ScratchDir scratch(opts.dirs.size() == 1 ? opts.dirs[0] : (tmp && *tmp ? tmp : "/tmp"));
  if (opts.dirs.size() != kShards && scratch.path().empty())
    return report_error(io_error("bench --mode kvstore-io: cannot create a directory in '{}'",
                                 opts.dirs.size() == 1 ? opts.dirs[0] : "the temporary directory"));
  kvstore::SsdTierOptions o;
  if (opts.dirs.size() == kShards) {
    o.targets = opts.dirs;
  } else {
    for (int t = 0; t < kShards; ++t) o.targets.push_back(scratch.path() + "/t" + std::to_string(t));
  }
  o.block_bytes = opts.block_kib * 1024;
  const int n_blocks = static_cast<int>(std::max<size_t>((opts.total_mib << 20) / o.block_bytes, kBatch));
  auto tier = kvstore::SsdTier::open(o);
  if (!tier.is_ok()) return report_error(tier.status());
  kvstore::IoEngine io(kvstore::IoMode::kAuto, true, kShards);
  std::vector<kvstore::BlockKey> keys;
  for (int i = 0; i < n_blocks; ++i) keys.push_back(bench_key(static_cast<uint64_t>(i)));
  std::vector<std::vector<uint8_t>> blocks(kBatch, std::vector<uint8_t>(o.block_bytes));
  for (int b = 0; b < kBatch; ++b) fill_block(static_cast<uint64_t>(b) + 1, blocks[b]);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));

  std::vector<bool> ok;
  double t0 = now_seconds();
  for (int i = 0; i < n_blocks; i += kBatch) {
    std::vector<kvstore::PutItem> items;
    for (int b = 0; b < kBatch && i + b < n_blocks; ++b)
      items.push_back(kvstore::PutItem{keys[i + b], blocks[b].data(), kvstore::TrafficClass::kChat});
    (*tier)->put_batch(io, items, now, &ok);
  }
  const double put_s = now_seconds() - t0;

  std::vector<std::vector<uint8_t>> out(kBatch, std::vector<uint8_t>(o.block_bytes));
  std::vector<uint8_t*> dst;
  for (auto& v : out) dst.push_back(v.data());
  size_t hits = 0;
  t0 = now_seconds();
  for (int i = 0; i < n_blocks; i += kBatch) {
    const int nb = std::min(kBatch, n_blocks - i);
    (*tier)->get_batch(io, std::span(keys.data() + i, nb), std::span(dst.data(), nb), now, &ok);
    hits += static_cast<size_t>(std::count(ok.begin(), ok.end(), true));
  }
  const double get_s = now_seconds() - t0;
  if (hits != static_cast<size_t>(n_blocks))
    return report_error(io_error("bench --mode kvstore-io: read back {} of {} blocks", hits, n_blocks));

  // Raw: the same number of files of the same size in the same directories, plain direct I/O.
  kvstore::ShardImages images(kShards * kBatch, kvstore::shard_bytes_for(o.block_bytes, kDataShards));
  std::memset(images.file(0), 0x3C, images.file_bytes() * kShards * kBatch);
  std::vector<std::string> paths;
  for (int i = 0; i < n_blocks; ++i)
    for (int s = 0; s < kShards; ++s) paths.push_back(kvstore::shard_path(o.targets[s], keys[i], s) + ".raw");
  auto raw = [&](bool write) {
    const double t = now_seconds();
    for (size_t p = 0; p < paths.size(); p += kShards * kBatch) {
      std::vector<kvstore::IoRequest> reqs;
      for (size_t q = p; q < std::min(paths.size(), p + kShards * kBatch); ++q) {
        kvstore::IoRequest r;
        r.path = paths[q];
        r.buf = images.file(static_cast<int>(q - p));
        r.len = images.file_bytes();
        r.domain = static_cast<int>(q % kShards);
        r.mtime_unix = now;
        reqs.push_back(std::move(r));
      }
      write ? io.write_files(reqs, false) : io.read_files(reqs);
    }
    return now_seconds() - t;
  };
  const double raw_write_s = raw(true);
  const double raw_read_s = raw(false);
  const double logical = double(n_blocks) * double(o.block_bytes);
  const double physical = double(paths.size()) * double(images.file_bytes());
  nlohmann::json j = {{"mode", "kvstore-io"},
                      {"blocks", n_blocks},
                      {"block_kib", opts.block_kib},
                      {"coding", "10+2"},
                      {"targets_in", opts.dirs.size() == kShards ? opts.dirs[0] : scratch.path()},
                      {"io_uring", io.using_uring()},
                      {"direct_io", io.direct_in_use(0)},
                      {"put_gb_per_s", logical / put_s / 1e9},
                      {"put_physical_gb_per_s", physical / put_s / 1e9},
                      {"get_gb_per_s", logical / get_s / 1e9},
                      {"raw_write_gb_per_s", physical / raw_write_s / 1e9},
                      {"raw_read_gb_per_s", physical / raw_read_s / 1e9}};
  std::printf("%s\n", j.dump().c_str());
  return kExitOk;
}

}  // namespace deepinfer::tools
