// Throughput benchmark (not a test: DISABLED_ unless asked for). Run:
//   test_kvstore --gtest_also_run_disabled_tests --gtest_filter='*KvBench*'
// Env: DEEPINFER_KVSTORE_TEST_DIR (where targets go), KVBENCH_BLOCK_KIB (default 1024),
// KVBENCH_TOTAL_MIB (default 256). Prints store put/get GB/s next to raw direct I/O of the same
// files (same count, same size, same io_uring batches, no coding or checksums).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "deepinfer/base/timer.h"
#include "deepinfer/kvstore/entry_codec.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/ssd_tier.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

size_t env_or(const char* name, size_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

TEST(KvBench, DISABLED_Throughput) {
  testing::TempDir dir;
  SsdTierOptions o;
  o.targets = dir.targets(12);
  o.block_bytes = env_or("KVBENCH_BLOCK_KIB", 1024) * 1024;
  const size_t total = env_or("KVBENCH_TOTAL_MIB", 256) << 20;
  const int n_blocks = static_cast<int>(std::max<size_t>(total / o.block_bytes, 32));
  const int batch = 32;
  auto tier = SsdTier::open(o);
  ASSERT_TRUE(tier.is_ok());
  IoEngine io(IoMode::kAuto, true, 12);
  std::vector<BlockKey> keys;
  std::vector<std::vector<uint8_t>> blocks(batch);
  for (int i = 0; i < n_blocks; ++i) keys.push_back(testing::test_key(i, 4242));
  for (int b = 0; b < batch; ++b) blocks[b] = testing::make_block(keys[b], o.block_bytes);
  const double logical = double(n_blocks) * o.block_bytes;

  double t0 = now_seconds();
  std::vector<bool> ok;
  for (int i = 0; i < n_blocks; i += batch) {
    std::vector<PutItem> items;
    for (int b = 0; b < batch && i + b < n_blocks; ++b) {
      items.push_back(PutItem{keys[i + b], blocks[b].data(), TrafficClass::kChat});
    }
    (*tier)->put_batch(io, items, 2'000'000'000, &ok);
  }
  double put_s = now_seconds() - t0;
  std::vector<std::vector<uint8_t>> out(batch, std::vector<uint8_t>(o.block_bytes));
  std::vector<uint8_t*> dst;
  for (auto& v : out) dst.push_back(v.data());
  t0 = now_seconds();
  size_t hits = 0;
  for (int i = 0; i < n_blocks; i += batch) {
    int nb = std::min(batch, n_blocks - i);
    (*tier)->get_batch(io, std::span(keys.data() + i, nb), std::span(dst.data(), nb), 1'000'000'000, &ok);
    hits += std::count(ok.begin(), ok.end(), true);
  }
  double get_s = now_seconds() - t0;
  EXPECT_EQ(hits, static_cast<size_t>(n_blocks));

  // Raw: the same number of files of the same size in the same directories, plain direct I/O.
  const int shards = 12;
  ShardImages img(shards * batch, shard_bytes_for(o.block_bytes, 10));
  std::memset(img.file(0), 0x3C, img.file_bytes() * shards * batch);
  std::vector<std::string> paths;
  for (int i = 0; i < n_blocks; ++i) {
    for (int s = 0; s < shards; ++s) {
      paths.push_back(shard_path(o.targets[s], keys[i], s) + ".raw");
    }
  }
  auto raw = [&](bool write) {
    double t = now_seconds();
    for (size_t p = 0; p < paths.size(); p += shards * batch) {
      std::vector<IoRequest> reqs;
      for (size_t q = p; q < std::min(paths.size(), p + shards * batch); ++q) {
        IoRequest r;
        r.path = paths[q];
        r.buf = img.file(static_cast<int>(q - p));
        r.len = img.file_bytes();
        r.domain = static_cast<int>(q % shards);
        r.mtime_unix = 2'000'000'000;
        reqs.push_back(std::move(r));
      }
      write ? io.write_files(reqs, false) : io.read_files(reqs);
    }
    return now_seconds() - t;
  };
  double raw_w = raw(true), raw_r = raw(false);
  const double physical = double(paths.size()) * img.file_bytes();
  std::printf(
      "kvstore bench: %d blocks x %zu KiB, 10+2 on 12 targets in %s, io_uring=%d direct=%d\n"
      "  store put: %.3f GB/s logical (%.3f GB/s physical)\n"
      "  store get: %.3f GB/s logical\n"
      "  raw direct write (same files/sizes): %.3f GB/s, raw direct read: %.3f GB/s\n",
      n_blocks, o.block_bytes >> 10, dir.path().c_str(), io.using_uring(), io.direct_in_use(0),
      logical / put_s / 1e9, physical / put_s / 1e9, logical / get_s / 1e9, physical / raw_w / 1e9,
      physical / raw_r / 1e9);
}

}  // namespace
}  // namespace deepinfer::kvstore
