// Speculative decoding end to end on the tiny Llama fixture: the same tokens and logprobs as
// without it (greedy and seeded sampling, penalties, stop strings, max_tokens, batch 1 and 32),
// with drafts actually accepted; the per-request opt-out; refused configurations.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "../common/test_model.h"
#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/recipe/tokenizer.h"
#include "spec_engine_util.h"

namespace deepinfer {
namespace {

using engine::speculative::SpecPolicy;

std::unique_ptr<engine::Engine> tiny_engine(const std::string& spec, SpecPolicy policy = SpecPolicy::kFixed,
                                            bool batch_invariant = true, int k = 4) {
  auto model = runnertest::open_model();
  if (model == nullptr) return nullptr;
  engine::EngineConfig cfg = spectest::engine_config(batch_invariant);
  cfg.speculative.method = spec;
  cfg.speculative.num_draft_tokens = k;
  cfg.speculative.policy = policy;
  auto e = engine::Engine::create(std::move(model), runnertest::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

using spectest::expect_same;
using spectest::mixed_requests;
using spectest::Out;
using spectest::run_all;

TEST(SpeculativeEngine, SameTokensAndLogprobsAtBatch1And32) {
  auto plain = tiny_engine("");
  auto fixed = tiny_engine("ngram", SpecPolicy::kFixed);
  auto dspark = tiny_engine("ngram", SpecPolicy::kDspark);
  ASSERT_TRUE(plain && fixed && dspark);
  const auto reqs = mixed_requests(32);
  const std::vector<Out> want = run_all(*plain, reqs);
  expect_same(want, run_all(*fixed, reqs));
  expect_same(want, run_all(*dspark, reqs));
  for (size_t i = 0; i < 8; ++i) {  // batch 1
    expect_same({want[i]}, run_all(*fixed, {reqs[i]}));
    expect_same({want[i]}, run_all(*dspark, {reqs[i]}));
  }
  // Drafts were verified and some accepted, so the comparison tested something.
  ASSERT_NE(fixed->spec_stats(), nullptr);
  EXPECT_GT(fixed->spec_stats()->accepted, 20);
  EXPECT_GT(fixed->spec_stats()->verified, fixed->spec_stats()->accepted);
  EXPECT_GT(dspark->spec_stats()->accepted, 0);
  EXPECT_EQ(plain->spec_stats(), nullptr);
}

TEST(SpeculativeEngine, WithoutBatchInvarianceGreedyTokensMatch) {
  auto plain = tiny_engine("", SpecPolicy::kFixed, false);
  auto spec = tiny_engine("ngram", SpecPolicy::kFixed, false);
  ASSERT_TRUE(plain && spec);
  auto reqs = mixed_requests(16);
  for (auto& r : reqs) r.sampling.logprobs = -1;
  const auto want = run_all(*plain, reqs);
  const auto got = run_all(*spec, reqs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(want[i].tokens, got[i].tokens) << i;
  EXPECT_GT(spec->spec_stats()->accepted, 0);
}

TEST(SpeculativeEngine, OptOutAndSeedsReproduce) {
  auto spec = tiny_engine("ngram");
  ASSERT_TRUE(spec);
  auto reqs = mixed_requests(4);
  for (auto& r : reqs) r.speculative = false;
  (void)run_all(*spec, reqs);
  EXPECT_EQ(spec->spec_stats()->verified, 0);  // every request opted out
  auto seeded = mixed_requests(12);
  for (auto& r : seeded) {
    r.sampling.temperature = 1.0f;
    r.sampling.has_seed = true;
    r.sampling.seed = 7;
  }
  const auto a = run_all(*spec, seeded);
  const auto b = run_all(*spec, seeded);
  expect_same(a, b);
}

TEST(SpeculativeEngine, RefusesBadSettings) {
  engine::EngineConfig cfg;
  cfg.speculative.method = "ngram";
  cfg.speculative.num_draft_tokens = 0;
  EXPECT_FALSE(engine::speculative::validate(cfg.speculative).is_ok());
  cfg.speculative.num_draft_tokens = 17;
  EXPECT_FALSE(engine::speculative::validate(cfg.speculative).is_ok());
  cfg.speculative.num_draft_tokens = 4;
  cfg.speculative.method = "draft";  // without --draft-model
  EXPECT_FALSE(engine::speculative::validate(cfg.speculative).is_ok());
}

}  // namespace
}  // namespace deepinfer
