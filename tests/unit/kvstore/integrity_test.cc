// Issue #30: the store manifest (target lists that do not match are refused; gc never deletes
// what it cannot prove is garbage), unreadable entries replaced by the next put, no mixed
// writes, background repair, unusable targets tolerated up to m, crashed writers' temps removed
// at open, honest verify reports, and reader-class lifetimes.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

constexpr size_t kBlock = 16 * 1024;

KvStoreConfig config(std::vector<std::string> targets, int k = 0, int m = -1) {
  KvStoreConfig c;
  c.targets = std::move(targets);
  c.data_shards = k;
  c.parity_shards = m;
  c.block_bytes = kBlock;
  c.host_tier_bytes = 0;
  c.sweep_interval_s = 0;
  c.replace_unreadable_after_s = 0;
  c.repair_per_sweep = 1000;
  return c;
}

std::vector<BlockKey> put_all(KvStore& s, int n, uint64_t salt, TrafficClass cls = TrafficClass::kChat) {
  std::vector<BlockKey> keys;
  for (int i = 0; i < n; ++i) {
    BlockKey k = test_key(i, salt);
    auto b = make_block(k, kBlock);
    const uint8_t* src = b.data();
    EXPECT_EQ(s.batch_put(std::span(&k, 1), std::span(&src, 1), cls), 1u);
    keys.push_back(k);
  }
  s.flush();
  return keys;
}

int read_exact(KvStore& s, const std::vector<BlockKey>& keys) {
  int ok = 0;
  std::vector<uint8_t> out(kBlock);
  for (const BlockKey& k : keys) {
    uint8_t* dst = out.data();
    if (s.batch_get(std::span(&k, 1), std::span(&dst, 1)) == 1) {
      EXPECT_EQ(out, make_block(k, kBlock)) << to_hex(k);
      ++ok;
    }
  }
  return ok;
}

size_t count_shard_files(const std::vector<std::string>& targets) {
  auto st = stat_store(targets);
  EXPECT_TRUE(st.is_ok()) << st.status().message();
  size_t n = 0;
  if (st.is_ok()) for (const auto& t : st->targets) n += t.shard_files;
  return n;
}

// Corrupts one byte and keeps the file's mtime (the entry's expiry): still a live entry.
void flip_byte(const std::string& path, size_t offset) {
  const auto mtime = fs::last_write_time(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c;
    f.get(c);
    f.seekp(offset);
    f.put(static_cast<char>(c ^ 0x40));
  }
  fs::last_write_time(path, mtime);
}

// Copies a shard file over another, keeping the source's mtime (a live entry's expiry).
void copy_shard(const std::string& from, const std::string& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::last_write_time(to, fs::last_write_time(from));
}

TEST(KvManifest, GcOfASubsetOrWithMissingTargetsDeletesNothing) {
  TempDir dir;
  auto targets = dir.targets(12);
  {
    auto s = KvStore::open(config(targets));
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    put_all(**s, 20, 1);
  }
  const size_t files = count_shard_files(targets);
  ASSERT_EQ(files, 20u * 12);
  // Half of the targets: refused (once every entry was taken for an orphan and deleted).
  std::vector<std::string> half(targets.begin(), targets.begin() + 6);
  auto gc = gc_store(half, GcOptions{.orphan_grace_s = -1});
  ASSERT_FALSE(gc.is_ok());
  EXPECT_NE(gc.status().message().find("created with 12 targets"), std::string::npos)
      << gc.status().message();
  EXPECT_FALSE(verify_store(half).is_ok());
  // Three targets briefly unmounted: refused as well.
  for (int t : {2, 5, 9}) fs::rename(targets[t], targets[t] + ".away");
  gc = gc_store(targets, GcOptions{.orphan_grace_s = -1});
  ASSERT_FALSE(gc.is_ok());
  EXPECT_NE(gc.status().message().find(targets[2]), std::string::npos) << gc.status().message();
  for (int t : {2, 5, 9}) fs::rename(targets[t] + ".away", targets[t]);
  // Another order: refused.
  auto swapped = targets;
  std::swap(swapped[0], swapped[1]);
  EXPECT_FALSE(gc_store(swapped, GcOptions{.orphan_grace_s = -1}).is_ok());
  EXPECT_FALSE(KvStore::open(config(swapped)).is_ok());
  EXPECT_FALSE(KvStore::open(config(half)).is_ok());
  EXPECT_EQ(count_shard_files(targets), files);
  // The whole list in order: nothing is garbage.
  gc = gc_store(targets, GcOptions{.orphan_grace_s = -1});
  ASSERT_TRUE(gc.is_ok()) << gc.status().message();
  EXPECT_EQ(gc->files_removed, 0u);
  EXPECT_EQ(count_shard_files(targets), files);
}

TEST(KvManifest, SameDirectoryTwiceAndMissingPathsRefused) {
  TempDir dir;
  auto targets = dir.targets(3);
  auto twice = targets;
  twice[2] = targets[0] + "/";
  EXPECT_FALSE(KvStore::open(config(twice)).is_ok());
  ASSERT_TRUE(KvStore::open(config(targets)).is_ok());
  EXPECT_FALSE(verify_store(twice).is_ok());
  EXPECT_FALSE(gc_store(twice).is_ok());
  EXPECT_FALSE(stat_store(twice).is_ok());
  // A missing path or a plain file is an error for verify and gc, not an empty store.
  auto missing = targets;
  missing[1] = dir.path() + "/nope";
  EXPECT_FALSE(verify_store(missing).is_ok());
  EXPECT_FALSE(gc_store(missing).is_ok());
  std::ofstream(dir.path() + "/plain") << "x";
  auto plain = targets;
  plain[1] = dir.path() + "/plain";
  EXPECT_FALSE(verify_store(plain).is_ok());
  EXPECT_FALSE(gc_store(plain).is_ok());
}

TEST(KvManifest, ExistingStoreKeepsItsCoding) {
  TempDir dir;
  auto targets = dir.targets(6);
  ASSERT_TRUE(KvStore::open(config(targets, 3, 3)).is_ok());
  auto s = KvStore::open(config(targets));  // automatic: adopts 3+3
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*s)->data_shards(), 3);
  EXPECT_EQ((*s)->parity_shards(), 3);
  EXPECT_FALSE(KvStore::open(config(targets, 4, 2)).is_ok());
}

TEST(KvUnreadable, PutOverCorruptEntryReplacesIt) {
  TempDir dir;
  auto c = config(dir.targets(12));
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = put_all(**s, 4, 2);
  // Three corrupt shards: more than parity can cover.
  for (int i : {0, 4, 8}) flip_byte(shard_path(c.targets[placement(keys[0], i, 12)], keys[0], i), 128 + 99);
  EXPECT_EQ(read_exact(**s, {keys[0]}), 0);
  put_all(**s, 1, 2);  // the engine recomputed the block and puts it again
  EXPECT_EQ((*s)->stats().ssd.replaced_unreadable, 1u);
  auto fresh = KvStore::open(c);  // nothing in RAM: the SSD copy is read
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_EQ(read_exact(**fresh, {keys[0]}), 1);
  auto v = verify_store(c.targets);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->healthy, 4u);
}

TEST(KvUnreadable, MixedWritesReplacedByNextPutAndRemovedByGc) {
  TempDir dir, other;
  auto c = config(dir.targets(6), 4, 2), c2 = config(other.targets(6), 4, 2);
  auto s = KvStore::open(c);
  auto s2 = KvStore::open(c2);
  ASSERT_TRUE(s.is_ok() && s2.is_ok());
  auto keys = put_all(**s, 2, 3);
  put_all(**s2, 2, 3);  // same keys and bytes, other write ids
  for (const BlockKey& k : keys) {
    for (int i = 0; i < 3; ++i) {
      int t = placement(k, i, 6);
      copy_shard(shard_path(c2.targets[t], k, i), shard_path(c.targets[t], k, i));
    }
  }
  EXPECT_EQ(read_exact(**s, keys), 0);  // 3 + 3 shards of two writes: never decoded together
  auto v = verify_store(c.targets);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->unrecoverable, 2u);
  ASSERT_FALSE(v->problems.empty());
  EXPECT_NE(v->problems[0].find("3 of 6 shards intact"), std::string::npos) << v->problems[0];
  // gc removes what cannot be decoded.
  auto gc = gc_store(c.targets, GcOptions{.orphan_grace_s = -1});
  ASSERT_TRUE(gc.is_ok()) << gc.status().message();
  EXPECT_EQ(gc->orphan_entries, 2u);
  EXPECT_EQ(count_shard_files(c.targets), 0u);
}

TEST(KvUnreadable, MixedEntryReplacedByPut) {
  TempDir dir, other;
  auto c = config(dir.targets(6), 4, 2), c2 = config(other.targets(6), 4, 2);
  auto s = KvStore::open(c);
  auto s2 = KvStore::open(c2);
  ASSERT_TRUE(s.is_ok() && s2.is_ok());
  auto keys = put_all(**s, 1, 4);
  put_all(**s2, 1, 4);
  for (int i = 0; i < 3; ++i) {
    int t = placement(keys[0], i, 6);
    copy_shard(shard_path(c2.targets[t], keys[0], i), shard_path(c.targets[t], keys[0], i));
  }
  EXPECT_EQ(read_exact(**s, keys), 0);
  put_all(**s, 1, 4);
  auto fresh = KvStore::open(c);  // nothing in RAM: the SSD copy is read
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_EQ(read_exact(**fresh, keys), 1);
}

// Six processes put the same keys at the same moment: every key must read back afterwards
// (no entry made of shards of two writes).
TEST(KvUnreadable, ConcurrentWritersOfTheSameKeysNeverMix) {
  TempDir dir;
  auto c = config(dir.targets(6), 4, 2);
  c.replace_unreadable_after_s = 10;  // the default: in-flight publications are not replaced
  ASSERT_TRUE(KvStore::open(c).is_ok());
  for (int round = 0; round < 12; ++round) {
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::vector<pid_t> kids;
    for (int p = 0; p < 6; ++p) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(go[1]);
        auto s = KvStore::open(c);
        if (!s.is_ok()) ::_exit(2);
        char b;
        if (::read(go[0], &b, 1) != 0) ::_exit(3);  // wait for the start signal (EOF)
        std::vector<BlockKey> keys;
        std::vector<std::vector<uint8_t>> blocks;
        std::vector<const uint8_t*> src;
        for (int i = 0; i < 32; ++i) {
          keys.push_back(test_key(i, 5000 + round));
          blocks.push_back(make_block(keys.back(), kBlock));
        }
        for (auto& bl : blocks) src.push_back(bl.data());
        (*s)->batch_put(keys, src, TrafficClass::kChat);
        (*s)->flush();
        s->reset();
        ::_exit(0);
      }
      kids.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);  // everyone starts at once
    for (pid_t pid : kids) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
  }
  auto v = verify_store(c.targets);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->entries, 12u * 32);
  EXPECT_EQ(v->unrecoverable, 0u) << (v->problems.empty() ? "" : v->problems[0]);
  EXPECT_EQ(v->healthy, 12u * 32);
}

TEST(KvRepair, SweeperRewritesDegradedEntries) {
  TempDir dir;
  auto c = config(dir.targets(12));
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto hot = put_all(**s, 10, 6), cold = put_all(**s, 10, 7);
  for (int t : {3, 7}) {
    fs::remove_all(c.targets[t]);
    fs::create_directory(c.targets[t]);  // replaced disks
  }
  EXPECT_EQ(read_exact(**s, hot), 10);  // readers queue what they found degraded
  (*s)->sweep_now();
  EXPECT_GE((*s)->stats().ssd.repaired_entries, 10u);
  EXPECT_EQ(read_exact(**s, hot), 10);
  auto v0 = verify_store(c.targets);
  ASSERT_TRUE(v0.is_ok());
  EXPECT_GE(v0->healthy, 10u);
  // The others are found by the rotating scan (one key bucket per sweep).
  for (int i = 0; i < 256; ++i) (*s)->sweep_now();
  EXPECT_EQ((*s)->stats().ssd.repaired_entries, 20u);
  auto v = verify_store(c.targets);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->healthy, 20u);
  // Full tolerance is back: two other targets can go.
  fs::remove_all(c.targets[0]);
  fs::remove_all(c.targets[11]);
  EXPECT_EQ(read_exact(**s, hot), 10);
  EXPECT_EQ(read_exact(**s, cold), 10);
}

TEST(KvUnusableTargets, StartWithUpToMUnusable) {
  TempDir dir;
  std::ofstream(dir.path() + "/file") << "x";
  auto targets = dir.targets(6);
  targets[1] = dir.path() + "/file/t1";  // cannot be created
  auto s = KvStore::open(config(targets, 4, 2));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)->stats().ssd.unusable_targets, 1u);
  auto keys = put_all(**s, 8, 8);
  EXPECT_EQ(read_exact(**s, keys), 8);
  s->reset();
  targets[4] = dir.path() + "/file/t4";
  s = KvStore::open(config(targets, 4, 2));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)->stats().ssd.unusable_targets, 2u);
  EXPECT_EQ(read_exact(**s, keys), 8);
  targets[5] = dir.path() + "/file/t5";
  auto refused = KvStore::open(config(targets, 4, 2));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("3 of 6 targets unusable"), std::string::npos)
      << refused.status().message();
}

TEST(KvStartup, CrashedWritersTempsRemovedWhenOpening) {
  TempDir dir;
  auto c = config(dir.targets(3));
  ASSERT_TRUE(KvStore::open(c).is_ok());
  // A writer of this host that died: its pid no longer exists.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  BlockKey k = test_key(1, 9);
  std::string sub = subdir_path(c.targets[0], k);
  fs::create_directories(sub);
  std::string temp = fmt::format("{}/.tmp.{}.0.{}.{}.{:016x}", sub, to_hex(k), host_tag(), dead, 7);
  std::ofstream(temp) << "partial";
  // A live writer's temp (ours) stays.
  std::string live = fmt::format("{}/.tmp.{}.1.{}.{}.{:016x}", sub, to_hex(k), host_tag(), ::getpid(), 8);
  std::ofstream(live) << "partial";
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ((*s)->stats().ssd.startup_temps_removed, 1u);
}

TEST(KvVerify, CrashLeftoversDoNotFailAndForeignEntriesAreCounted) {
  TempDir dir;
  auto c = config(dir.targets(6), 4, 2);
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = put_all(**s, 3, 10);
  // Entry 0: only 2 shards published (a writer killed mid-publish): never visible.
  for (int i = 2; i < 6; ++i) fs::remove(shard_path(c.targets[placement(keys[0], i, 6)], keys[0], i));
  auto v = verify_store(c.targets);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->incomplete, 1u);
  EXPECT_EQ(v->unrecoverable, 0u);
  EXPECT_EQ(v->healthy, 2u);
}

TEST(KvLifetime, ChatHitOnAgentBlocksKeepsTheLongerLifetime) {
  TempDir dir;
  int64_t now = 1'800'000'000;
  auto c = config(dir.targets(3));
  c.touch_interval_s = 1;
  c.clock = [&now] { return now; };
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = put_all(**s, 1, 11, TrafficClass::kAgent);
  now += 3600;
  std::vector<uint8_t> out(kBlock);
  uint8_t* dst = out.data();
  ASSERT_EQ((*s)->batch_get(keys, std::span(&dst, 1), TrafficClass::kChat), 1u);
  struct stat st;
  ASSERT_EQ(::stat(shard_path(c.targets[placement(keys[0], 0, 3)], keys[0], 0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, now + 7 * 86400);
  // An agent hit afterwards never shortens it.
  now += 60;
  ASSERT_EQ((*s)->batch_get(keys, std::span(&dst, 1), TrafficClass::kAgent), 1u);
  ASSERT_EQ(::stat(shard_path(c.targets[placement(keys[0], 0, 3)], keys[0], 0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, now - 60 + 7 * 86400);
}

}  // namespace
}  // namespace deepinfer::kvstore
