// Restoring a cached DeepSeek-V4 prefix (issue 22). The KV store keeps each block's paged state
// (compressed entries, indexer keys) and, at the ends of cached prefixes (a computed prompt, a
// finished sequence), a sliding-window checkpoint: the window rows and compressor tails a step
// after that end reads. A later engine ("after a restart": a new Engine on the same directory)
// restores exactly from it; where no checkpoint is, "exact" recomputes and "bounded" replays.
// Exactness is checked bitwise (tokens and every logprob) against an engine that computes every
// prompt from scratch, in batch-invariant mode, for hits ending at every offset inside and at the
// edge of a window and of a compression window.
#include <unistd.h>

#include <filesystem>
#include <random>

#include "deepinfer/kvstore/admin.h"
#include "v4_engine_run.h"
#include "v4_fixture.h"

namespace deepinfer {
namespace {

using v4test::expect_bitwise_equal;
using v4test::Generated;
using v4test::generate;
using Swa = engine::SwaRestore;

constexpr int kGenerated = 4;

struct EngineSetup {
  std::string store_dir;  // "" = no KV store
  bool prefix_caching = true;
  Swa swa = Swa::kExact;
};

std::unique_ptr<engine::Engine> make_engine(const std::string& fixture, const EngineSetup& s) {
  auto loaded = v4test::open_dir(v4test::fixture_dir(fixture));
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().message();
  if (!loaded.is_ok()) return nullptr;
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.block_size = 4;
  cfg.max_num_batched_tokens = 64;
  cfg.kv_cache_bytes = size_t{16} << 20;
  cfg.batch_invariant = true;
  cfg.enable_prefix_caching = s.prefix_caching;
  cfg.default_swa_restore = s.swa;
  if (!s.store_dir.empty()) {
    cfg.kv_store_dirs = {s.store_dir};
    cfg.kv_store_namespace = "deepseek_v4_restore_test/" + fixture;
  }
  auto e = engine::Engine::create(std::move(*loaded), v4test::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> random_prompt(int length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(2 + static_cast<int32_t>(rng() % 126));
  return p;
}

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("deepinfer_v4_restore_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

class DeepseekV4Restore : public ::testing::TestWithParam<const char*> {};

// Prompts of every length over three blocks plus the recent span, each its own random tokens:
// their hits end at every offset relative to the window, and their first computed token at
// every offset inside a compression window. A second engine on the same store restores each
// prompt's prefix from its checkpoint, in both modes (bounded never replays where the exact
// restore reaches as far), bitwise equal to computing it; so does the writer from its RAM.
TEST_P(DeepseekV4Restore, ExactRestoreAtEveryOffsetEqualsRecomputing) {
  ScratchDir dir(std::string("exact_") + GetParam());
  auto scratch = make_engine(GetParam(), {"", false});
  ASSERT_NE(scratch, nullptr);
  const int bs = scratch->kv_block_size();
  const int recent = scratch->kv_recent_tokens();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Generated> want;
  for (int len = bs + 1; len <= 3 * bs + recent; ++len) {
    prompts.push_back(random_prompt(len, 1000 + len));
    want.push_back(generate(*scratch, prompts.back(), kGenerated, Swa::kExact));
  }
  {
    auto writer = make_engine(GetParam(), {dir.str(), true, Swa::kBounded});
    ASSERT_NE(writer, nullptr);
    for (size_t i = 0; i < prompts.size(); ++i) {
      expect_bitwise_equal(want[i], generate(*writer, prompts[i], kGenerated, Swa::kBounded),
                           "writer, computing " + std::to_string(prompts[i].size()) + " tokens");
      writer->flush_kv_store();  // a full SSD write queue would drop entries (counted, not here)
    }
    EXPECT_GE(writer->kv_stats().checkpoints_saved, int64_t(prompts.size()));
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Generated ram = generate(*writer, prompts[i], kGenerated, Swa::kExact);
      expect_bitwise_equal(want[i], ram, "RAM hit of " + std::to_string(prompts[i].size()));
      EXPECT_EQ(ram.cached, (int(prompts[i].size()) - 1) / bs * bs);
    }
    writer->flush_kv_store();
  }
  for (Swa swa : {Swa::kExact, Swa::kBounded}) {
    auto reader = make_engine(GetParam(), {dir.str(), true, swa});
    ASSERT_NE(reader, nullptr);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int len = static_cast<int>(prompts[i].size());
      const std::string what = std::string(swa == Swa::kExact ? "exact" : "bounded") +
                               " store restore of " + std::to_string(len) + " tokens";
      const Generated got = generate(*reader, prompts[i], kGenerated, swa);
      expect_bitwise_equal(want[i], got, what);
      EXPECT_EQ(got.cached, (len - 1) / bs * bs) << what;
      EXPECT_EQ(got.replayed, 0) << what;
    }
    EXPECT_EQ(reader->kv_stats().replays, 0);
    EXPECT_EQ(reader->kv_stats().checkpoints_loaded, int64_t(prompts.size()));
  }
}

// A conversation's next turn (the first prompt, its answer, a new message) hits the checkpoint
// written when the first turn finished, after a restart, and decodes as if computed whole.
TEST_P(DeepseekV4Restore, NextTurnRestoresTheFinishedTurnsCheckpoint) {
  ScratchDir dir(std::string("turn_") + GetParam());
  auto scratch = make_engine(GetParam(), {"", false});
  ASSERT_NE(scratch, nullptr);
  const int bs = scratch->kv_block_size();
  const std::vector<int32_t> first = random_prompt(2 * bs + 3, 7);
  std::vector<int32_t> second;
  {
    auto writer = make_engine(GetParam(), {dir.str(), true});
    ASSERT_NE(writer, nullptr);
    const Generated turn = generate(*writer, first, 2 * bs, Swa::kExact);
    second = first;
    second.insert(second.end(), turn.tokens.begin(), turn.tokens.end());
    for (int32_t t : random_prompt(3, 8)) second.push_back(t);
    writer->flush_kv_store();
  }
  const Generated want = generate(*scratch, second, kGenerated, Swa::kExact);
  auto reader = make_engine(GetParam(), {dir.str(), true});
  ASSERT_NE(reader, nullptr);
  const Generated got = generate(*reader, second, kGenerated, Swa::kExact);
  expect_bitwise_equal(want, got, "next turn from the store");
  // The first turn computed its prompt and all but its last token: those full blocks.
  EXPECT_EQ(got.cached, (int(first.size()) + 2 * bs - 1) / bs * bs);
}

// A prompt that shares only part of a stored prefix hits where no checkpoint is. "exact"
// recomputes it (bitwise equal to computing it), "bounded" loads the blocks' paged state and
// replays the last recent_tokens tokens (counted in usage), within the drift bound of the
// in-memory replay test (docs/models.md). The store counts the checkpoint parts apart.
TEST_P(DeepseekV4Restore, AHitWithoutCheckpointIsRecomputedOrReplayed) {
  ScratchDir dir(std::string("partial_") + GetParam());
  auto scratch = make_engine(GetParam(), {"", false});
  ASSERT_NE(scratch, nullptr);
  const int bs = scratch->kv_block_size();
  const int recent = scratch->kv_recent_tokens();
  const int shared_blocks = recent / bs + 2;  // the hit is longer than the replay
  const std::vector<int32_t> stored = random_prompt((shared_blocks + 2) * bs + 1, 11);
  // Two prompts that share the stored one's first shared_blocks blocks, then diverge inside
  // the next block (one for each engine, so that neither sees what the other stored).
  auto diverging = [&](uint32_t seed) {
    std::vector<int32_t> p(stored.begin(), stored.begin() + shared_blocks * bs + 1);
    p.push_back(2 + (stored[p.size()] - 2 + 1) % 126);
    for (int32_t t : random_prompt(bs + 1, seed)) p.push_back(t);
    return p;
  };
  const std::vector<int32_t> other = diverging(12), other_bounded = diverging(13);
  {
    auto writer = make_engine(GetParam(), {dir.str(), true});
    ASSERT_NE(writer, nullptr);
    generate(*writer, stored, kGenerated, Swa::kExact);
    writer->flush_kv_store();
  }
  auto stat = kvstore::stat_store({dir.str()});
  ASSERT_TRUE(stat.is_ok()) << stat.status().message();
  EXPECT_GT(stat->entries_by_kind[int(kvstore::EntryKind::kKvBlock)], 0u);
  EXPECT_GT(stat->entries_by_kind[int(kvstore::EntryKind::kSwaCheckpoint)], 0u);

  const Generated want = generate(*scratch, other, kGenerated, Swa::kExact);
  const Generated want_bounded = generate(*scratch, other_bounded, kGenerated, Swa::kExact);
  auto exact = make_engine(GetParam(), {dir.str(), true, Swa::kExact});
  ASSERT_NE(exact, nullptr);
  const Generated recomputed = generate(*exact, other, kGenerated, Swa::kExact);
  expect_bitwise_equal(want, recomputed, "exact without a checkpoint");
  EXPECT_EQ(recomputed.cached, 0);
  EXPECT_EQ(recomputed.replayed, 0);

  auto bounded = make_engine(GetParam(), {dir.str(), true, Swa::kBounded});
  ASSERT_NE(bounded, nullptr);
  const Generated replayed = generate(*bounded, other_bounded, kGenerated, Swa::kBounded);
  EXPECT_EQ(replayed.cached, shared_blocks * bs);
  EXPECT_EQ(replayed.replayed, recent);
  EXPECT_EQ(bounded->kv_stats().replays, 1);
  EXPECT_EQ(bounded->kv_stats().tier_loaded_blocks, shared_blocks);
  ASSERT_EQ(replayed.tokens.size(), want_bounded.tokens.size());
  const double kl = v4test::top_kl(want_bounded.logprobs[0], replayed.logprobs[0]);
  std::printf("%s: bounded replay of %d tokens over a %d-token store hit: first-position top-20 "
              "KL %.6f\n",
              GetParam(), recent, shared_blocks * bs, kl);
  EXPECT_LT(kl, 0.01);
  // The replayed state never reaches the store or the prefix cache: exact is still exact.
  const Generated after = generate(*bounded, other_bounded, kGenerated, Swa::kExact);
  expect_bitwise_equal(want_bounded, after, "exact after a bounded replay on the same engine");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV4Restore, ::testing::ValuesIn(v4test::kFixtures));

}  // namespace
}  // namespace deepinfer
