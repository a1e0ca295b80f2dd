// The draft-model drafter on the tiny fixtures (256-token vocabulary): tiny_llama drafting for
// itself (its drafts are the target's own greedy tokens, so greedy drafts are all accepted)
// and tiny_qwen2 drafting for tiny_llama (another model, so most drafts are rejected and its
// KV is rolled back every step). Outputs bitwise identical to non-speculative decoding; the
// drafter's rollback and eviction give the same drafts as a fresh drafter; refusals.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "../common/test_model.h"
#include "../deepseek_v4/v4_fixture.h"
#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/speculative/draft_model_drafter.h"
#include "deepinfer/engine/speculative/draft_model_setup.h"
#include "spec_engine_util.h"

namespace deepinfer {
namespace {

using engine::speculative::Draft;
using engine::speculative::DraftInput;
using engine::speculative::SpecPolicy;
using spectest::Out;

std::string qwen_dir() { return testing::source_dir() + "/tests/reference/fixtures/tiny_qwen2"; }

std::unique_ptr<engine::Engine> draft_engine(const std::string& draft_dir, SpecPolicy policy = SpecPolicy::kFixed,
                                             bool batch_invariant = true, size_t draft_kv_bytes = 0) {
  auto model = runnertest::open_model();
  std::shared_ptr<model::Model> draft = runnertest::open_model(draft_dir);
  if (model == nullptr || draft == nullptr) return nullptr;
  engine::EngineConfig cfg = spectest::engine_config(batch_invariant);
  cfg.speculative.method = "draft";
  cfg.speculative.policy = policy;
  cfg.speculative.draft_model = draft_dir;
  cfg.speculative.draft_weights = std::move(draft);
  cfg.speculative.draft_kv_cache_bytes = draft_kv_bytes;
  auto e = engine::Engine::create(std::move(model), runnertest::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

std::vector<engine::GenerationRequest> greedy_requests(int n) {
  auto reqs = spectest::mixed_requests(n);
  for (auto& r : reqs) {
    r.sampling = engine::SamplingParams{};
    r.sampling.temperature = 0;
    r.sampling.logprobs = 2;
    r.stop.clear();
  }
  return reqs;
}

TEST(DraftModelSpeculation, SelfDraftingAcceptsEveryGreedyDraft) {
  auto plain = spectest::plain_engine();
  auto self = draft_engine(runnertest::fixture_dir());
  ASSERT_TRUE(plain && self);
  const auto reqs = greedy_requests(16);
  const auto want = spectest::run_all(*plain, reqs);
  spectest::expect_same(want, spectest::run_all(*self, reqs));
  const auto* st = self->spec_stats();
  ASSERT_NE(st, nullptr);
  // Batch invariance makes the draft model's logits the target's, bit for bit: every greedy
  // draft is the target's argmax. (A wrong catch-up or rollback would draft other tokens.)
  EXPECT_GT(st->verified, 100);
  EXPECT_EQ(st->accepted, st->verified);
  EXPECT_GT(st->draft_seconds, 0);
}

TEST(DraftModelSpeculation, DisagreeingDraftModelSameOutputsAtBatch32And1) {
  auto plain = spectest::plain_engine();
  auto fixed = draft_engine(qwen_dir(), SpecPolicy::kFixed);
  auto dspark = draft_engine(qwen_dir(), SpecPolicy::kDspark);
  ASSERT_TRUE(plain && fixed && dspark);
  const auto reqs = spectest::mixed_requests(32);  // greedy, seeded top-p, penalties, stops
  const auto want = spectest::run_all(*plain, reqs);
  spectest::expect_same(want, spectest::run_all(*fixed, reqs));
  spectest::expect_same(want, spectest::run_all(*dspark, reqs));
  for (size_t i = 0; i < 6; ++i) {
    spectest::expect_same({want[i]}, spectest::run_all(*fixed, {reqs[i]}));
    spectest::expect_same({want[i]}, spectest::run_all(*dspark, {reqs[i]}));
  }
  // Rejections happened (so rollback was exercised), and the drafts were not all rejected.
  const auto* st = fixed->spec_stats();
  EXPECT_GT(st->verified - st->accepted, 100);
  EXPECT_GT(st->accepted, 0);
}

TEST(DraftModelSpeculation, GreedyTokensMatchWithoutBatchInvarianceAndSeedsReproduce) {
  auto plain = spectest::plain_engine(false);
  auto spec = draft_engine(runnertest::fixture_dir(), SpecPolicy::kDspark, false);
  ASSERT_TRUE(plain && spec);
  auto reqs = greedy_requests(12);
  for (auto& r : reqs) r.sampling.logprobs = -1;
  const auto want = spectest::run_all(*plain, reqs);
  const auto got = spectest::run_all(*spec, reqs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(want[i].tokens, got[i].tokens) << i;
  EXPECT_GT(spec->spec_stats()->accepted, 0);
  auto seeded = spectest::mixed_requests(8);
  for (auto& r : seeded) {
    r.sampling.temperature = 1.0f;
    r.sampling.has_seed = true;
    r.sampling.seed = 11;
  }
  spectest::expect_same(spectest::run_all(*spec, seeded), spectest::run_all(*spec, seeded));
}

TEST(DraftModelSpeculation, SmallDraftPoolEvictsAndStaysCorrect) {
  // Room for few sequences' draft KV: the drafter evicts idle ones or drafts nothing.
  auto plain = spectest::plain_engine();
  auto small = draft_engine(runnertest::fixture_dir(), SpecPolicy::kFixed, true, size_t{96} << 10);  // 12 blocks
  ASSERT_TRUE(plain && small);
  const auto reqs = greedy_requests(16);
  spectest::expect_same(spectest::run_all(*plain, reqs), spectest::run_all(*small, reqs));
  EXPECT_GT(small->spec_stats()->accepted, 0);
}

// The drafter alone: after a rejection its KV is rolled back, so its next drafts are what a
// drafter that never saw the rejected tokens proposes; batched proposals equal single ones.
TEST(DraftModelDrafter, RollbackAndBatchingGiveAFreshDraftersProposals) {
  engine::speculative::DraftModelOptions o;
  o.num_blocks = 64;
  o.batch_invariant = true;
  ThreadPool pool(1);
  auto make = [&] {
    return engine::speculative::make_draft_model_drafter(runnertest::open_model(qwen_dir()), &pool, o);
  };
  auto kept = make();
  std::vector<int32_t> a{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57};
  std::vector<int32_t> b{1, 99, 98, 97, 96};
  const auto first = kept->propose(std::vector<DraftInput>{{1, a, 4}, {2, b, 3}});
  ASSERT_EQ(first[0].tokens.size(), 4u);
  ASSERT_EQ(first[1].tokens.size(), 3u);
  // The target accepted a's first draft and then chose another token; b accepted all three
  // and added a bonus token.
  a.push_back(first[0].tokens[0]);
  a.push_back(static_cast<int32_t>((first[0].tokens[1] + 1) % 256));
  b.insert(b.end(), first[1].tokens.begin(), first[1].tokens.end());
  b.push_back(7);
  const auto next = kept->propose(std::vector<DraftInput>{{1, a, 4}, {2, b, 4}});
  auto fresh = make();
  EXPECT_EQ(next[0].tokens, fresh->propose(std::vector<DraftInput>{{1, a, 4}})[0].tokens);
  EXPECT_EQ(next[1].tokens, fresh->propose(std::vector<DraftInput>{{2, b, 4}})[0].tokens);
  EXPECT_EQ(next[0].signals.size(), next[0].tokens.size());
  // Forgotten: it catches up from scratch, to the same drafts.
  kept->forget(1);
  EXPECT_EQ(next[0].tokens, kept->propose(std::vector<DraftInput>{{1, a, 4}})[0].tokens);
}

TEST(DraftModelSpeculation, RefusesAnotherVocabularyAndHybridModels) {
  // A draft model whose logits cover another vocabulary (the V4 fixture: 128 tokens).
  engine::EngineConfig cfg = spectest::engine_config(true);
  cfg.speculative.method = "draft";
  cfg.speculative.draft_model = "v4-fixture";
  cfg.speculative.draft_weights = v4test::open_fixture("h2_mixed");
  ASSERT_TRUE(cfg.speculative.draft_weights);
  auto e = engine::Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), cfg);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--draft-model v4-fixture"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().code(), StatusCode::kInvalidArgument);  // a file problem: exit status 1
  // No weights loaded for "draft".
  cfg.speculative.draft_weights = nullptr;
  EXPECT_FALSE(engine::Engine::create(runnertest::open_model(), runnertest::byte_tokenizer(), cfg).is_ok());
}

TEST(DraftModelSetup, VocabularyCheckNamesBothModels) {
  auto a = runnertest::byte_tokenizer();
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b == 65 ? 66 : b)));
  spec.eos_id = 2;
  auto other = recipe::Tokenizer::build(std::move(spec));
  ASSERT_TRUE(other.is_ok());
  EXPECT_TRUE(engine::speculative::check_same_vocabulary(*a, "t.gguf", *a, "d.gguf").is_ok());
  const Status st = engine::speculative::check_same_vocabulary(*a, "t.gguf", **other, "d.gguf");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("--draft-model d.gguf"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("t.gguf"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("token 65"), std::string::npos) << st.message();
  // A missing file is named, and is not a usage error.
  const auto missing = engine::speculative::load_draft_model("/nonexistent/draft.gguf", *a, "t.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/draft.gguf"), std::string::npos);
  EXPECT_NE(missing.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
