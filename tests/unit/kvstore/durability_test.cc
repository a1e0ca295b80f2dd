// Erasure-coding proof: any 2 of 12 targets (or 2 shards of one entry) lost or corrupted and
// every entry still reads back bit-exact; a third loss is a miss, never garbage; verify
// repairs lost shards from parity.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "deepinfer/kvstore/admin.h"
#include "deepinfer/kvstore/kv_store.h"
#include "deepinfer/kvstore/layout.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

namespace fs = std::filesystem;
using testing::make_block;
using testing::TempDir;
using testing::test_key;

constexpr size_t kBlock = 64 * 1024;

KvStoreConfig config(const TempDir& dir, int targets, int k = 0, int m = -1) {
  KvStoreConfig c;
  c.targets = dir.targets(targets);
  c.data_shards = k;
  c.parity_shards = m;
  c.block_bytes = kBlock;
  c.host_tier_bytes = 0;
  c.sweep_interval_s = 0;
  return c;
}

std::vector<BlockKey> write_entries(KvStore& s, int n, uint64_t salt = 0) {
  std::vector<BlockKey> keys;
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<const uint8_t*> src;
  for (int i = 0; i < n; ++i) {
    keys.push_back(test_key(i, salt));
    blocks.push_back(make_block(keys.back(), kBlock));
  }
  for (auto& b : blocks) src.push_back(b.data());
  EXPECT_EQ(s.batch_put(keys, src, TrafficClass::kChat), keys.size());
  s.flush();
  return keys;
}

// Number of keys that read back; any block that reads back must be bit-exact.
int read_exact(KvStore& s, const std::vector<BlockKey>& keys) {
  int ok = 0;
  std::vector<uint8_t> out(kBlock);
  for (const BlockKey& k : keys) {
    std::fill(out.begin(), out.end(), 0xAB);
    uint8_t* dst = out.data();
    if (s.batch_get(std::span(&k, 1), std::span(&dst, 1)) == 1) {
      EXPECT_EQ(out, make_block(k, kBlock)) << "key " << to_hex(k) << " read back wrong";
      ++ok;
    }
  }
  return ok;
}

TEST(KvDurability, AnyTwoOfTwelveTargetsLost) {
  TempDir dir;
  auto c = config(dir, 12);
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  ASSERT_EQ((*s)->data_shards(), 10);
  auto keys = write_entries(**s, 12);
  ASSERT_EQ(read_exact(**s, keys), 12);
  // Every pair of targets disappears (renamed away), one pair at a time.
  for (int a = 0; a < 12; ++a) {
    for (int b = a + 1; b < 12; ++b) {
      fs::rename(c.targets[a], c.targets[a] + ".gone");
      fs::rename(c.targets[b], c.targets[b] + ".gone");
      EXPECT_EQ(read_exact(**s, keys), 12) << "targets " << a << "," << b << " lost";
      fs::rename(c.targets[a] + ".gone", c.targets[a]);
      fs::rename(c.targets[b] + ".gone", c.targets[b]);
    }
  }
  EXPECT_GT((*s)->stats().ssd.reconstructions, 0u);
  // A third lost target: every entry (12 shards on 12 targets) is a miss, never garbage.
  for (int t : {1, 5, 9}) fs::rename(c.targets[t], c.targets[t] + ".gone");
  EXPECT_EQ(read_exact(**s, keys), 0);
  EXPECT_EQ((*s)->batch_exists(keys), 0u);
  for (int t : {1, 5, 9}) fs::rename(c.targets[t] + ".gone", c.targets[t]);
  EXPECT_EQ(read_exact(**s, keys), 12);
}

TEST(KvDurability, DeletedTargetsAreRepairedFromParity) {
  TempDir dir;
  auto c = config(dir, 12);
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = write_entries(**s, 12);
  fs::remove_all(c.targets[3]);
  fs::remove_all(c.targets[7]);
  EXPECT_EQ(read_exact(**s, keys), 12);
  // Writes while two targets are gone still publish (degraded) and stay readable.
  auto more = write_entries(**s, 4, /*salt=*/77);
  EXPECT_EQ((*s)->stats().ssd.degraded_writes, 4u);
  EXPECT_EQ(read_exact(**s, more), 4);
  // Replace the two disks with empty ones and repair.
  fs::create_directory(c.targets[3]);
  fs::create_directory(c.targets[7]);
  auto report = verify_store(c.targets, VerifyOptions{.repair = true});
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_EQ(report->entries, 16u);
  EXPECT_EQ(report->degraded, 16u);
  EXPECT_EQ(report->repaired_entries, 16u);
  EXPECT_EQ(report->repaired_shards, 32u);
  EXPECT_EQ(report->unrecoverable, 0u);
  auto again = verify_store(c.targets);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->healthy, 16u);
  // Full redundancy is back: two *other* targets can now go.
  fs::remove_all(c.targets[0]);
  fs::remove_all(c.targets[11]);
  EXPECT_EQ(read_exact(**s, keys), 12);
  EXPECT_EQ(read_exact(**s, more), 4);
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x40));
}

TEST(KvDurability, TwoCorruptShardsOfOneEntry) {
  TempDir dir;
  auto c = config(dir, 12);
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = write_entries(**s, 6);
  auto path = [&](const BlockKey& k, int shard) {
    return shard_path(c.targets[placement(k, shard, 12)], k, shard);
  };
  // Entry 0: a flipped payload byte in a data shard + a truncated parity shard.
  flip_byte(path(keys[0], 2), 128 + 1000);
  fs::resize_file(path(keys[0], 11), 100);
  // Entry 1: a flipped header byte + a data shard replaced by another entry's shard.
  flip_byte(path(keys[1], 0), 20);
  fs::copy_file(path(keys[2], 9), path(keys[1], 9), fs::copy_options::overwrite_existing);
  // Entry 2: two data shards swapped with each other (valid files, wrong places).
  fs::copy_file(path(keys[2], 3), path(keys[2], 4), fs::copy_options::overwrite_existing);
  fs::remove(path(keys[2], 3));
  EXPECT_EQ(read_exact(**s, keys), 6);
  auto st = (*s)->stats().ssd;
  EXPECT_EQ(st.reconstructions, 3u);
  EXPECT_GE(st.corrupt_shards, 4u);
  // A third bad shard for entry 0: a miss, not garbage; the others are unaffected.
  flip_byte(path(keys[0], 5), 128 + 7);
  EXPECT_EQ(read_exact(**s, {keys[0]}), 0);
  EXPECT_EQ(read_exact(**s, {keys[1], keys[2], keys[3], keys[4], keys[5]}), 5);
  auto report = verify_store(c.targets, VerifyOptions{.repair = true, .delete_unrecoverable = true, .grace_s = -1});
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report->unrecoverable, 1u);
  EXPECT_EQ(report->deleted, 1u);
  EXPECT_EQ(report->repaired_entries, 2u);
  EXPECT_EQ(report->healthy, 3u);
}

TEST(KvDurability, FourPlusTwoAnyPairAndMixedWritesNeverMix) {
  TempDir dir;
  auto c = config(dir, 6, 4, 2);
  auto s = KvStore::open(c);
  ASSERT_TRUE(s.is_ok());
  auto keys = write_entries(**s, 8);
  for (int a = 0; a < 6; ++a) {
    for (int b = a + 1; b < 6; ++b) {
      fs::rename(c.targets[a], c.targets[a] + ".gone");
      fs::rename(c.targets[b], c.targets[b] + ".gone");
      EXPECT_EQ(read_exact(**s, keys), 8) << "targets " << a << "," << b;
      fs::rename(c.targets[a] + ".gone", c.targets[a]);
      fs::rename(c.targets[b] + ".gone", c.targets[b]);
    }
  }
  // Same key, different bytes written into a second store; half of its shards copied over:
  // 3 + 3 shards from two different writes must not be decoded together.
  TempDir other;
  auto c2 = config(other, 6, 4, 2);
  auto s2 = KvStore::open(c2);
  ASSERT_TRUE(s2.is_ok());
  std::vector<uint8_t> wrong(kBlock, 0x5A);
  const uint8_t* src = wrong.data();
  ASSERT_EQ((*s2)->batch_put(std::span(&keys[0], 1), std::span(&src, 1), TrafficClass::kChat), 1u);
  (*s2)->flush();
  for (int i = 0; i < 3; ++i) {
    int t = placement(keys[0], i, 6);
    fs::copy_file(shard_path(c2.targets[t], keys[0], i), shard_path(c.targets[t], keys[0], i),
                  fs::copy_options::overwrite_existing);
  }
  EXPECT_EQ(read_exact(**s, {keys[0]}), 0);
  EXPECT_EQ((*s)->stats().ssd.unrecoverable, 1u);
}

}  // namespace
}  // namespace deepinfer::kvstore
