// Determinism you can rely on: a "needle" request gives bitwise-identical tokens and logprobs
// alone and inside random batches of other requests; the same seed gives the same output
// across engine instances and --max-num-seqs settings; prefix caching does not change results.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

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
                                              bool prefix_caching = true, int budget = 512) {
    engine::EngineConfig cfg;
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

}  // namespace
}  // namespace deepinfer
