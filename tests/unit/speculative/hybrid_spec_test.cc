// Speculative decoding on DeepSeek-V4 (hybrid KV state: sliding-window rows and compressor
// tails per token in recent slabs, compressed entries and indexer keys per `ratio` tokens in
// the blocks). Rejected drafts are not undone: their rows and entries lie at positions at or
// after num_computed_tokens and are written again before any later position reads them. These
// tests check that on the tiny V4 fixtures: outputs bitwise identical to non-speculative
// decoding in batch-invariant mode, with many drafts rejected, some steps rejecting 4 or more
// consecutive positions (so a rejected draft closed a CSA compression window of 4 tokens and
// its compressed entry was written from a token the sequence never had). And V4's MTP block
// as the drafter.
#include <gtest/gtest.h>

#include <vector>

#include "../deepseek_v4/v4_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/tokenizer.h"
#include "spec_engine_util.h"

namespace deepinfer {
namespace {

using engine::speculative::SpecPolicy;

std::shared_ptr<const recipe::Tokenizer> byte_tokenizer_128() {
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 128; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 0;
  spec.eos_id = 1;
  auto t = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
}

std::unique_ptr<engine::Engine> v4_engine(const std::string& fixture, const std::string& method,
                                          SpecPolicy policy = SpecPolicy::kFixed, int k = 8) {
  auto m = v4test::open_dir(v4test::fixture_dir(fixture));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  engine::EngineConfig cfg = spectest::engine_config(true);
  cfg.block_size = 16;              // a multiple of every compression ratio of the fixtures
  cfg.max_num_batched_tokens = 96;  // prompts are prefilled in chunks that split windows
  cfg.kv_cache_bytes = size_t{16} << 20;
  cfg.speculative.method = method;
  cfg.speculative.policy = policy;
  cfg.speculative.num_draft_tokens = k;
  auto e = engine::Engine::create(std::move(m).value(), byte_tokenizer_128(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

// Periodic prompts (the n-gram drafter proposes their continuation, which the random model
// mostly does not follow) and aperiodic ones; greedy, seeded top-p and a repetition penalty.
std::vector<engine::GenerationRequest> v4_requests(int n) {
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    engine::GenerationRequest r;
    const int period = 3 + i % 6;
    for (int j = 0; j < 20 + 5 * (i % 5); ++j)
      r.prompt_ids.push_back(i % 4 == 3 ? 2 + (j * 37 + i) % 126 : 2 + (j % period) * 11 + i % 7);
    r.max_tokens = 24 + i % 11;
    r.sampling.temperature = 0;
    r.sampling.logprobs = 2;
    if (i % 5 == 1) r.sampling.repetition_penalty = 1.2f;
    if (i % 5 == 2) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 7 + static_cast<uint64_t>(i);
      r.sampling.has_seed = true;
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

class HybridSpeculation : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridSpeculation, NgramSameOutputsAtBatch32And1WithRejectionsAcrossWindows) {
  auto plain = v4_engine(GetParam(), "");
  auto fixed = v4_engine(GetParam(), "ngram", SpecPolicy::kFixed);
  auto dspark = v4_engine(GetParam(), "ngram", SpecPolicy::kDspark, 4);
  ASSERT_TRUE(plain && fixed && dspark);
  const auto reqs = v4_requests(32);
  const auto want = spectest::run_all(*plain, reqs);
  spectest::expect_same(want, spectest::run_all(*fixed, reqs));
  spectest::expect_same(want, spectest::run_all(*dspark, reqs));
  for (size_t i = 0; i < reqs.size(); i += 3) {
    const auto alone = spectest::run_all(*plain, {reqs[i]});
    spectest::expect_same(alone, spectest::run_all(*fixed, {reqs[i]}));
  }
  const auto* st = fixed->spec_stats();
  ASSERT_NE(st, nullptr);
  int64_t seq_steps = 0;
  for (int64_t n : st->accepted_histogram) seq_steps += n;
  const int64_t rejected = st->verified - st->accepted;
  std::printf("%s: %lld sequence-steps verified %lld drafts, accepted %lld\n", GetParam(),
              static_cast<long long>(seq_steps), static_cast<long long>(st->verified),
              static_cast<long long>(st->accepted));
  EXPECT_GT(st->accepted, 0);
  // A step's rejected drafts are consecutive positions. More than 3 rejected per step on
  // average means some step rejected >= 4 in a row, which covers a position closing a CSA
  // window of 4 tokens.
  EXPECT_GT(rejected, 3 * seq_steps);
}

INSTANTIATE_TEST_SUITE_P(TinyV4, HybridSpeculation, ::testing::Values("h2_mixed", "h4_deepseek"));

// DeepSeek-V4's own MTP block (fp4_e2m1 has mtp.0) as the drafter: its window state is the
// drafter's own hybrid cache; the target's state is rolled back as for the n-gram drafter.
TEST(HybridSpeculation, V4MtpSameOutputsAtBatch32And1) {
  auto plain = v4_engine("fp4_e2m1", "");
  auto fixed = v4_engine("fp4_e2m1", "mtp", SpecPolicy::kFixed, 4);
  auto dspark = v4_engine("fp4_e2m1", "mtp", SpecPolicy::kDspark, 4);
  ASSERT_TRUE(plain && fixed && dspark);
  const auto reqs = v4_requests(32);
  const auto want = spectest::run_all(*plain, reqs);
  spectest::expect_same(want, spectest::run_all(*fixed, reqs));
  spectest::expect_same(want, spectest::run_all(*dspark, reqs));
  for (size_t i = 0; i < reqs.size(); i += 4) {
    const auto alone = spectest::run_all(*plain, {reqs[i]});
    spectest::expect_same(alone, spectest::run_all(*fixed, {reqs[i]}));
  }
  const auto* st = fixed->spec_stats();
  ASSERT_NE(st, nullptr);
  std::printf("fp4_e2m1 mtp: %lld verified, %lld accepted\n", static_cast<long long>(st->verified),
              static_cast<long long>(st->accepted));
  EXPECT_GT(st->verified, 200);
  EXPECT_GT(st->accepted, 0);
}

TEST(HybridSpeculation, MtpRefusedWithoutTheLayerWithOneLine) {
  auto m = v4test::open_dir(v4test::fixture_dir("h2_mixed"));
  ASSERT_TRUE(m.is_ok());
  engine::EngineConfig cfg = spectest::engine_config(true);
  cfg.block_size = 16;
  cfg.kv_cache_bytes = size_t{16} << 20;
  cfg.speculative.method = "mtp";
  auto e = engine::Engine::create(std::move(m).value(), byte_tokenizer_128(), cfg);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(e.status().message().find("no MTP layer"), std::string::npos) << e.status().message();
  EXPECT_EQ(e.status().message().find('\n'), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace deepinfer
