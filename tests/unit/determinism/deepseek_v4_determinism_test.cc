// Determinism on DeepSeek-V4 (the tiny fixtures of tests/reference/make_tiny_deepseek_v4.py):
// with --batch-invariant a seeded "needle" request gives bitwise-identical tokens and logprobs
// alone (whole-prompt prefill) and among random requests whose prefill chunks and decode rows
// share its steps, under token budgets that cut its prompt inside compression windows; a seed
// reproduces across engines, budgets, --max-num-seqs and prefix caching.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "../deepseek_v4/v4_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/tokenizer.h"
#include "needle_run.h"

namespace deepinfer {
namespace {

using Output = testing::NeedleOutput;
constexpr int32_t kVocab = 128;  // every fixture's vocabulary

// The fixtures have no tokenizer; the engine only needs one to detokenize.
std::shared_ptr<const recipe::Tokenizer> byte_tokenizer() {
  recipe::TokenizerSpec spec;
  for (int b = 0; b < kVocab; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 0;
  spec.eos_id = 1;
  auto t = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
}

struct EngineOptions {
  bool batch_invariant = true;
  int budget = 512;  // max_num_batched_tokens: below the prompt length, prefill is chunked
  int max_num_seqs = 32;
  bool prefix_caching = false;
};

std::unique_ptr<engine::Engine> make_engine(const std::string& fixture, const EngineOptions& o) {
  auto loaded = v4test::open_dir(v4test::fixture_dir(fixture));
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().message();
  if (!loaded.is_ok()) return nullptr;
  engine::EngineConfig cfg;
  cfg.num_threads = 2;
  cfg.block_size = 4;
  cfg.max_num_seqs = o.max_num_seqs;
  cfg.max_num_batched_tokens = o.budget;
  cfg.batch_invariant = o.batch_invariant;
  cfg.enable_prefix_caching = o.prefix_caching;
  cfg.kv_cache_bytes = size_t{32} << 20;
  auto e = engine::Engine::create(std::move(*loaded), byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// 37 tokens: past every fixture's window, over several CSA (4) and HCA (8, 16) windows.
engine::GenerationRequest needle(uint64_t seed = 1234) {
  engine::GenerationRequest r;
  for (int i = 0; i < 37; ++i) r.prompt_ids.push_back(2 + (i * 37 + 11) % (kVocab - 2));
  r.max_tokens = 16;
  r.ignore_eos = true;
  r.sampling.temperature = 0.8f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = seed;
  r.sampling.has_seed = true;
  r.sampling.logprobs = 3;
  return r;
}

// Others of 1-45 prompt tokens and 1-20 new ones, greedy or sampled without a seed.
std::vector<engine::GenerationRequest> random_batch(int n, std::mt19937& rng) {
  std::vector<engine::GenerationRequest> v(n);
  for (auto& r : v) {
    const int len = 1 + static_cast<int>(rng() % 45);
    for (int i = 0; i < len; ++i) r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % (kVocab - 2)));
    r.max_tokens = 1 + static_cast<int>(rng() % 20);
    r.ignore_eos = true;
    r.sampling.temperature = (rng() % 2) ? 0.0f : 1.0f;
  }
  return v;
}

Output run(engine::Engine& e, const engine::GenerationRequest& n,
           const std::vector<engine::GenerationRequest>& others, std::mt19937& rng) {
  return testing::run_needle(e, n, others, others.empty() ? 0 : rng() % (others.size() + 1));
}

class DeepseekV4Determinism : public ::testing::TestWithParam<const char*> {};

// Budgets 7 and 13 cut the needle's 37-token prompt at positions that divide neither ratio, and
// the others' prefill chunks and decode rows fill the rest of each step.
TEST_P(DeepseekV4Determinism, NeedleIsBitwiseIdenticalAloneAndInChunkedBatches) {
  std::mt19937 rng(42);
  auto whole = make_engine(GetParam(), {});
  ASSERT_NE(whole, nullptr);
  const Output alone = run(*whole, needle(), {}, rng);
  ASSERT_EQ(alone.tokens.size(), 16u);
  ASSERT_EQ(alone.logprobs.size(), 16u * 4);
  for (int budget : {7, 13, 512}) {
    auto e = make_engine(GetParam(), {.budget = budget});
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(run(*e, needle(), {}, rng) == alone) << "needle alone differs at budget " << budget;
    for (int batch : {2, 9, 24}) {
      const Output mixed = run(*e, needle(), random_batch(batch, rng), rng);
      EXPECT_TRUE(mixed == alone) << "needle differs among " << batch << " others at budget "
                                  << budget;
    }
  }
}

TEST_P(DeepseekV4Determinism, SameSeedSameOutputAcrossEnginesAndBatches) {
  std::mt19937 rng(7);
  const auto others = random_batch(6, rng);
  auto a = make_engine(GetParam(), {.prefix_caching = true});
  auto b = make_engine(GetParam(), {.budget = 5, .max_num_seqs = 3});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const Output x = run(*a, needle(), others, rng);
  ASSERT_EQ(x.tokens.size(), 16u);
  EXPECT_TRUE(run(*b, needle(), others, rng) == x) << "another engine, budget 5, 3 sequences";
  // Again on `a`: the needle's whole blocks now come from the prefix cache.
  const Output again = run(*a, needle(), random_batch(3, rng), rng);
  EXPECT_GE(again.cached, 32);
  EXPECT_TRUE(again == x) << "prefix-cache hit in another batch";
  const Output other_seed = run(*a, needle(99), {}, rng);
  EXPECT_NE(other_seed.tokens, x.tokens) << "a different seed should give a different sample";
}

// The same comparison with batch_invariant off must be able to fail: V4 keeps its router and
// hyper-connection matrices in f32, and a step of 32 or more rows takes them through OpenBLAS
// sgemm, whose blocking depends on the shape.
TEST_P(DeepseekV4Determinism, NegativeControlNeedleChangesWithoutBatchInvariance) {
  std::mt19937 rng(42);
  auto e = make_engine(GetParam(), {.batch_invariant = false});
  ASSERT_NE(e, nullptr);
  const Output alone = run(*e, needle(), {}, rng);
  int differing = 0;
  for (int batch : {9, 24, 31}) {
    const Output mixed = run(*e, needle(), random_batch(batch, rng), rng);
    std::printf("  %s, needle among %2d others: %s\n", GetParam(), batch,
                mixed == alone ? "bitwise identical"
                               : (mixed.tokens == alone.tokens ? "same tokens, other logprobs"
                                                               : "different tokens"));
    differing += mixed == alone ? 0 : 1;
  }
  EXPECT_GT(differing, 0) << "the needle never changed with batch_invariant off";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV4Determinism,
                         ::testing::Values("h2_mixed", "h4_deepseek", "fp8_ue8m0"));

}  // namespace
}  // namespace deepinfer
