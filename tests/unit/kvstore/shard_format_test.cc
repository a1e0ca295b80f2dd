// Shard files: round trip, and any damaged or hostile bytes give a Status, never a crash.
#include "deepinfer/kvstore/shard_format.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "deepinfer/kvstore/kv_store.h"
#include "test_util.h"

namespace deepinfer::kvstore {
namespace {

std::vector<uint8_t> valid_file(ShardHeader* out) {
  ShardHeader h;
  h.key = testing::test_key(7);
  h.write_id = 99;
  h.block_bytes = 1000;
  h.data_shards = 4;
  h.parity_shards = 2;
  h.shard_bytes = static_cast<uint32_t>(shard_bytes_for(1000, 4));
  h.shard_index = 5;
  h.num_targets = 6;
  h.traffic_class = TrafficClass::kAgent;
  h.kind = EntryKind::kSwaCheckpoint;
  h.created_unix = 123;
  std::vector<uint8_t> file(shard_file_bytes(h.shard_bytes));
  for (size_t i = kShardHeaderBytes; i < kShardHeaderBytes + h.shard_bytes; ++i) file[i] = uint8_t(i * 7);
  h.payload_hash = checksum64(file.data() + kShardHeaderBytes, h.shard_bytes);
  write_shard_header(h, file.data());
  *out = h;
  return file;
}

TEST(ShardFormat, RoundTrip) {
  ShardHeader h;
  auto file = valid_file(&h);
  auto back = parse_shard_file(file.data(), file.size(), "x");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->key, h.key);
  EXPECT_EQ(back->write_id, 99u);
  EXPECT_EQ(back->shard_index, 5);
  EXPECT_EQ(back->traffic_class, TrafficClass::kAgent);
  EXPECT_EQ(back->kind, EntryKind::kSwaCheckpoint);
  EXPECT_EQ(back->created_unix, 123);
}

// Files written before entry kinds existed have a zero byte there: KV blocks. An unknown kind
// (a newer writer, or damage that kept the header checksum) is refused, not guessed.
TEST(ShardFormat, EntryKindDefaultsToKvBlockAndUnknownKindsAreRefused) {
  ShardHeader h;
  auto file = valid_file(&h);
  h.kind = EntryKind::kKvBlock;
  write_shard_header(h, file.data());
  auto back = parse_shard_file(file.data(), file.size(), "x");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->kind, EntryKind::kKvBlock);
  file[91] = 7;
  const uint64_t header_hash = checksum64(file.data(), 120);  // keep the header self-consistent
  std::memcpy(file.data() + 120, &header_hash, sizeof(header_hash));
  auto bad = parse_shard_file(file.data(), file.size(), "x");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("entry kind 7"), std::string::npos) << bad.status().message();
}

TEST(ShardFormat, EveryFlippedBitOrTruncationIsRejected) {
  ShardHeader h;
  const auto file = valid_file(&h);
  const size_t used = kShardHeaderBytes + h.shard_bytes;
  for (size_t byte = 0; byte < used; byte += 3) {
    auto bad = file;
    bad[byte] ^= uint8_t(1u << (byte % 8));
    auto r = parse_shard_file(bad.data(), bad.size(), "bad");
    ASSERT_FALSE(r.is_ok()) << "flip at byte " << byte << " went unnoticed";
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  }
  for (size_t len : {size_t{0}, size_t{50}, kShardHeaderBytes, used - 1}) {
    EXPECT_FALSE(parse_shard_file(file.data(), len, "short").is_ok()) << len;
  }
  std::mt19937 rng(5);
  std::vector<uint8_t> noise(4096);
  for (int i = 0; i < 200; ++i) {
    for (auto& b : noise) b = uint8_t(rng());
    EXPECT_FALSE(parse_shard_file(noise.data(), noise.size(), "noise").is_ok());
  }
}

TEST(ShardFormat, StoreOpenReportsUnusableTargetsBeyondParity) {
  testing::TempDir dir;
  std::string file = dir.path() + "/plain_file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  KvStoreConfig c;
  c.targets = {file + "/sub", dir.path() + "/ok"};
  c.data_shards = 1;
  c.parity_shards = 1;
  c.block_bytes = 4096;
  auto s = KvStore::open(c);  // one unusable target of 1+1: served from the other
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ((*s)->stats().ssd.unusable_targets, 1u);
  s->reset();
  c.targets = {file + "/sub", file + "/sub2"};
  s = KvStore::open(c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIoError);
  EXPECT_NE(s.status().message().find("plain_file"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace deepinfer::kvstore
