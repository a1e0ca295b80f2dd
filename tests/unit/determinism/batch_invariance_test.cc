// Determinism you can rely on: a "needle" request gives bitwise-identical tokens and logprobs
// alone and inside random batches of other requests; the same seed gives the same output
// across engine instances and --max-num-seqs settings; prefix caching does not change results.
// The same holds with a 16-bit KV cache (--kv-cache-dtype bf16 / f16): every K/V row is
// rounded once when written and read from the cache alike, whether computed in the same step,
// an earlier chunk, a prefix-cache hit or a KV-store load.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "../common/default_engine.h"
#include "needle_run.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

using Output = testing::NeedleOutput;

class Determinism : public ::testing::Test {
 protected:
  void SetUp() override {
    DI_REQUIRE_DEFAULT_MODEL();
    model_ = testing::DefaultModel::open();
    ASSERT_TRUE(model_.tokenizer);
  }

  std::unique_ptr<engine::Engine> make_engine(int max_num_seqs, bool batch_invariant,
                                              bool prefix_caching = true, int budget = 512,
                                              const std::string& kv_dtype = "auto",
                                              const std::string& kv_store_dir = "") {
    engine::EngineConfig cfg;
    cfg.kv_cache_dtype = kv_dtype;
    if (!kv_store_dir.empty()) cfg.kv_store_dirs = {kv_store_dir};
    cfg.num_threads = 2;
    cfg.max_num_seqs = max_num_seqs;
    cfg.batch_invariant = batch_invariant;
    cfg.enable_prefix_caching = prefix_caching;
    cfg.max_num_batched_tokens = budget;
    cfg.kv_cache_bytes = size_t{256} << 20;
    return model_.engine(cfg);
  }

  static engine::GenerationRequest needle() {
    engine::GenerationRequest r;
    r.prompt_ids = {1, 4093, 198, 17986, 253, 1346, 2377, 563, 260, 9632, 30, 2, 198, 1, 520, 9531, 198};
    r.max_tokens = 24;
    r.ignore_eos = true;
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1234;
    r.sampling.has_seed = true;
    r.sampling.logprobs = 3;
    return r;
  }

  // Runs `needle` together with `others` (added in a random order around it) and returns the
  // needle's output.
  static Output run(engine::Engine& e, const engine::GenerationRequest& n,
                    const std::vector<engine::GenerationRequest>& others, std::mt19937& rng) {
    return testing::run_needle(e, n, others, others.empty() ? 0 : rng() % (others.size() + 1));
  }

  static std::vector<engine::GenerationRequest> random_batch(int n, std::mt19937& rng) {
    std::vector<engine::GenerationRequest> v(n);
    for (auto& r : v) {
      const int len = 1 + static_cast<int>(rng() % 60);
      for (int i = 0; i < len; ++i) r.prompt_ids.push_back(100 + static_cast<int32_t>(rng() % 20000));
      r.max_tokens = 1 + static_cast<int>(rng() % 30);
      r.ignore_eos = true;
      r.sampling.temperature = (rng() % 2) ? 0.0f : 1.0f;
    }
    return v;
  }

  testing::DefaultModel model_;
};

TEST_F(Determinism, NeedleIsBitwiseIdenticalAloneAndInRandomBatches) {
  std::mt19937 rng(42);
  auto e = make_engine(64, /*batch_invariant=*/true);
  const Output alone = run(*e, needle(), {}, rng);
  ASSERT_EQ(alone.tokens.size(), 24u);
  for (int batch : {2, 17, 64}) {
    const Output mixed = run(*e, needle(), random_batch(batch, rng), rng);
    EXPECT_TRUE(mixed == alone) << "needle differs inside a batch of " << batch + 1;
  }
}

TEST_F(Determinism, NeedleIsBitwiseIdenticalInRandomBatchesWith16BitKvCache) {
  for (const char* dtype : {"bf16", "f16"}) {
    std::mt19937 rng(43);
    auto e = make_engine(64, /*batch_invariant=*/true, true, 512, dtype);
    const Output alone = run(*e, needle(), {}, rng);
    ASSERT_EQ(alone.tokens.size(), 24u);
    for (int batch : {5, 40}) {
      const Output mixed = run(*e, needle(), random_batch(batch, rng), rng);
      EXPECT_TRUE(mixed == alone) << "KV " << dtype << ": needle differs inside a batch of " << batch + 1;
    }
  }
}

// Chunked prefill (8-token chunks) reads the earlier chunks' rows back from the 16-bit cache
// exactly as a one-chunk prefill reads its own: same tokens, same logprobs.
TEST_F(Determinism, ChunkedPrefillMatchesOneChunkWithBf16KvCache) {
  std::mt19937 rng(8);
  auto a = make_engine(64, false, false, 512, "bf16");
  auto b = make_engine(3, false, false, /*budget=*/8, "bf16");
  const auto others = random_batch(4, rng);
  EXPECT_TRUE(run(*a, needle(), others, rng) == run(*b, needle(), others, rng));
}

TEST_F(Determinism, SameSeedSameOutputAcrossEnginesAndMaxNumSeqs) {
  std::mt19937 rng(7);
  auto a = make_engine(64, false);
  auto b = make_engine(3, false, /*prefix_caching=*/false, /*budget=*/8);  // tiny chunks
  const auto others = random_batch(6, rng);
  const Output x = run(*a, needle(), others, rng);
  const Output y = run(*b, needle(), others, rng);
  EXPECT_TRUE(x == y);
  engine::GenerationRequest other_seed = needle();
  other_seed.sampling.seed = 99;
  const Output z = run(*a, other_seed, {}, rng);
  EXPECT_NE(z.tokens, x.tokens) << "a different seed should give a different sample";
}

TEST_F(Determinism, PrefixCacheHitGivesIdenticalOutputAndCountsCachedTokens) {
  std::mt19937 rng(3);
  auto e = make_engine(8, false);
  engine::GenerationRequest r = needle();
  for (int i = 0; i < 40; ++i) r.prompt_ids.push_back(300 + i);  // 57 tokens: 3 full blocks
  const Output cold = run(*e, r, {}, rng);
  const Output warm = run(*e, r, {}, rng);
  EXPECT_EQ(cold.cached, 0);
  EXPECT_EQ(warm.cached, 48);
  EXPECT_TRUE(warm == cold);
}

TEST_F(Determinism, PrefixCacheHitGivesIdenticalOutputWith16BitKvCache) {
  for (const char* dtype : {"bf16", "f16"}) {
    std::mt19937 rng(3);
    auto e = make_engine(8, false, true, 512, dtype);
    engine::GenerationRequest r = needle();
    for (int i = 0; i < 40; ++i) r.prompt_ids.push_back(300 + i);  // 57 tokens: 3 full blocks
    auto fresh = make_engine(8, false, /*prefix_caching=*/false, 512, dtype);
    const Output computed = run(*fresh, r, {}, rng);
    const Output cold = run(*e, r, {}, rng);
    const Output warm = run(*e, r, {}, rng);
    EXPECT_EQ(warm.cached, 48) << dtype;
    EXPECT_TRUE(cold == computed) << dtype;
    EXPECT_TRUE(warm == computed) << dtype;
  }
}

// A 16-bit cache's blocks written to the KV store and loaded by a fresh engine ("another
// process") give the tokens of computing the prompt; an engine with another KV dtype on the same
// store finds nothing (the store's namespace holds the dtype).
TEST_F(Determinism, KvStoreRoundTripWithBf16KvCacheGivesIdenticalOutput) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("deepinfer_kv16_store_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::mt19937 rng(5);
  engine::GenerationRequest r = needle();
  for (int i = 0; i < 40; ++i) r.prompt_ids.push_back(500 + i);  // 57 tokens: 3 full blocks
  Output computed;
  {
    auto writer = make_engine(8, false, true, 512, "bf16", dir.string());
    computed = run(*writer, r, {}, rng);
    EXPECT_EQ(computed.cached, 0);
    writer->flush_kv_store();
  }
  {
    auto other_dtype = make_engine(8, false, true, 512, "f32", dir.string());
    EXPECT_EQ(run(*other_dtype, r, {}, rng).cached, 0) << "an f32 cache was served bf16 blocks";
  }
  auto reader = make_engine(8, false, true, 512, "bf16", dir.string());
  const Output loaded = run(*reader, r, {}, rng);
  EXPECT_EQ(loaded.cached, 48);
  EXPECT_GE(reader->kv_store_tier()->stats().loaded_blocks, 3);
  EXPECT_TRUE(loaded == computed);
  reader.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
