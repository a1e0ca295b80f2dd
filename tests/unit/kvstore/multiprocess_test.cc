// Crash safety and sharing between processes: writers SIGKILLed at random points leave only
// entries that verify; two live processes read each other's entries from the same targets.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "deepinfer/kvstore/admin.h"
#include "deepinfer/kvstore/kv_store.h"
#include "deepinfer/kvstore/layout.h"
#include "deepinfer/kvstore/manifest.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

namespace fs = std::filesystem;
using testing::fill_block;
using testing::make_block;
using testing::TempDir;
using testing::test_key;

constexpr size_t kBlock = 64 * 1024;

KvStoreConfig config(const TempDir& dir) {
  KvStoreConfig c;
  c.targets = dir.targets(6);
  c.data_shards = 4;
  c.parity_shards = 2;
  c.block_bytes = kBlock;
  c.host_tier_bytes = 0;
  c.sweep_interval_s = 0;
  return c;
}

// Child: writes batches forever (until killed). Content is a function of the key.
[[noreturn]] void writer_child(const KvStoreConfig& c, uint64_t salt, int ready_fd) {
  auto s = KvStore::open(c);
  if (!s.is_ok()) ::_exit(3);
  char one = 1;
  if (::write(ready_fd, &one, 1) != 1) ::_exit(3);
  std::vector<uint8_t> block(kBlock);
  for (uint64_t i = 0;; ++i) {
    BlockKey k = test_key(i, salt);
    fill_block(k, block.data(), kBlock);
    const uint8_t* src = block.data();
    (*s)->batch_put(std::span(&k, 1), std::span(&src, 1), TrafficClass::kAgent);
    if (i % 4 == 3) (*s)->flush();
  }
}

std::set<BlockKey> keys_on_disk(const std::vector<std::string>& targets) {
  std::set<BlockKey> keys;
  for (const auto& t : targets) {
    if (!fs::exists(t + "/kv1")) continue;
    for (const auto& e : fs::recursive_directory_iterator(t + "/kv1")) {
      BlockKey k;
      int shard;
      if (e.is_regular_file() && parse_shard_name(e.path().filename().string(), &k, &shard)) keys.insert(k);
    }
  }
  return keys;
}

TEST(KvMultiProcess, KillNineWritersFiftyTimes) {
  TempDir dir;
  auto c = config(dir);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 50; ++iter) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) writer_child(c, 1000 + iter, ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);  // the store is open: kill during the writes
    ::close(ready[0]);
    ::close(ready[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited early with status " << status;
  }
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  // Opening the store removed every temp file the killed writers left (issue #30).
  auto at_open = stat_store(c.targets);
  ASSERT_TRUE(at_open.is_ok());
  for (const auto& t : at_open->targets) EXPECT_EQ(t.temp_files, 0u) << t.path;
  // Every entry that is visible reads back bit-exact; invisible ones are misses.
  auto keys = keys_on_disk(c.targets);
  ASSERT_GT(keys.size(), 0u);
  size_t visible = 0;
  std::vector<uint8_t> out(kBlock);
  for (const BlockKey& k : keys) {
    uint8_t* dst = out.data();
    bool exists = (*s)->batch_exists(std::span(&k, 1)) == 1;
    bool got = (*s)->batch_get(std::span(&k, 1), std::span(&dst, 1)) == 1;
    if (got) {
      EXPECT_EQ(out, make_block(k, kBlock));
    }
    EXPECT_EQ(exists, got) << to_hex(k);
    visible += got;
  }
  EXPECT_GT(visible, 0u);
  // Killed writers never leave a published shard that fails its checksum.
  auto report = verify_store(c.targets);
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->corrupt_shards, 0u);
  EXPECT_EQ(report->unrecoverable, 0u);
  EXPECT_EQ(report->entries - report->incomplete, visible);
  // gc removes the dead writers' temps and never-published leftovers.
  auto gc = gc_store(c.targets, GcOptions{.orphan_grace_s = -1});
  ASSERT_TRUE(gc.is_ok());
  auto after = stat_store(c.targets);
  ASSERT_TRUE(after.is_ok());
  for (const auto& t : after->targets) EXPECT_EQ(t.temp_files, 0u) << t.path;
  EXPECT_EQ(after->entries, visible);
  // And the store keeps working.
  BlockKey fresh = test_key(42, 999);
  auto block = make_block(fresh, kBlock);
  const uint8_t* src = block.data();
  ASSERT_EQ((*s)->batch_put(std::span(&fresh, 1), std::span(&src, 1), TrafficClass::kChat), 1u);
  (*s)->flush();
  uint8_t* dst = out.data();
  ASSERT_EQ((*s)->batch_get(std::span(&fresh, 1), std::span(&dst, 1)), 1u);
  EXPECT_EQ(out, block);
}

// Child for the sharing test: writes its own keys and a shared set, waits for the peer, then
// reads everything the peer wrote. Exit code 0 = all checks passed.
[[noreturn]] void sharing_child(const KvStoreConfig& c, const std::string& dir, int me) {
  const int peer = 1 - me;
  auto s = KvStore::open(c);
  if (!s.is_ok()) ::_exit(2);
  std::vector<uint8_t> block(kBlock), out(kBlock);
  auto put = [&](const BlockKey& k) {
    fill_block(k, block.data(), kBlock);
    const uint8_t* src = block.data();
    return (*s)->batch_put(std::span(&k, 1), std::span(&src, 1), TrafficClass::kChat) == 1;
  };
  auto check = [&](const BlockKey& k) {
    uint8_t* dst = out.data();
    if ((*s)->batch_get(std::span(&k, 1), std::span(&dst, 1)) != 1) return false;
    fill_block(k, block.data(), kBlock);
    return out == block;
  };
  for (int i = 0; i < 20; ++i) {
    if (!put(test_key(i, 100 + me)) || !put(test_key(i, 555))) ::_exit(4);
    // Meanwhile read whatever of the peer's keys is already there: must be exact if found.
    BlockKey pk = test_key(i, 100 + peer);
    uint8_t* dst = out.data();
    if ((*s)->batch_get(std::span(&pk, 1), std::span(&dst, 1)) == 1) {
      fill_block(pk, block.data(), kBlock);
      if (out != block) ::_exit(5);
    }
    if (i % 8 == 7) (*s)->flush();
  }
  (*s)->flush();
  fs::path mine = fs::path(dir) / ("done" + std::to_string(me));
  std::FILE* f = std::fopen(mine.c_str(), "w");
  if (f) std::fclose(f);
  fs::path theirs = fs::path(dir) / ("done" + std::to_string(peer));
  // Up to 2 minutes: on an oversubscribed machine (parallel builds) the peer can take > 20 s.
  for (int w = 0; w < 12000 && !fs::exists(theirs); ++w) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!fs::exists(theirs)) ::_exit(6);
  for (int i = 0; i < 20; ++i) {
    if (!check(test_key(i, 100 + peer)) || !check(test_key(i, 555))) ::_exit(7);
  }
  s->reset();
  ::_exit(0);
}

// Processes that create the same new store at the same moment agree on one store: before the
// first usable target decided, each wrote its own id to every target and some targets got one
// id, some the other, so every opener was refused ("belong to different stores").
TEST(KvMultiProcess, SimultaneousCreatorsAgreeOnOneStore) {
  constexpr int kProcesses = 6;
  for (int round = 0; round < 25; ++round) {
    TempDir dir;
    const KvStoreConfig c = config(dir);
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    pid_t pids[kProcesses];
    for (int p = 0; p < kProcesses; ++p) {
      pids[p] = ::fork();
      ASSERT_GE(pids[p], 0);
      if (pids[p] == 0) {
        ::close(go[1]);
        char byte;
        (void)!::read(go[0], &byte, 1);  // returns at EOF: every child starts together
        auto s = KvStore::open(c);
        ::_exit(s.is_ok() ? 0 : 2);
      }
    }
    ::close(go[0]);
    ::close(go[1]);
    for (int p = 0; p < kProcesses; ++p) {
      int status = 0;
      ASSERT_EQ(::waitpid(pids[p], &status, 0), pids[p]);
      ASSERT_TRUE(WIFEXITED(status));
      EXPECT_EQ(WEXITSTATUS(status), 0) << "round " << round << " process " << p;
    }
    auto check = check_manifests(c.targets);
    ASSERT_TRUE(check.is_ok()) << check.status().message();
    EXPECT_EQ(check->missing() + check->without_manifest(), 0) << "round " << round;
  }
}

TEST(KvMultiProcess, TwoProcessesShareTargets) {
  TempDir dir;
  auto c = config(dir);
  c.sweep_interval_s = 0.05;  // both sweep all the time; the flock keeps them apart
  pid_t pids[2];
  for (int me = 0; me < 2; ++me) {
    pids[me] = ::fork();
    ASSERT_GE(pids[me], 0);
    if (pids[me] == 0) sharing_child(c, dir.path(), me);
  }
  for (int me = 0; me < 2; ++me) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[me], &status, 0), pids[me]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "process " << me;
  }
  auto report = verify_store(c.targets);
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->entries, 60u);  // 20 + 20 own keys, 20 shared
  EXPECT_EQ(report->healthy, 60u);
  EXPECT_EQ(report->corrupt_shards, 0u);
}

}  // namespace
}  // namespace deepinfer::kvstore
