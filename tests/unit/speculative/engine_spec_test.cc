// Speculative decoding end to end on the tiny Llama fixture: the same tokens and logprobs as
// without it (greedy and seeded sampling, penalties, stop strings, max_tokens, batch 1 and 32),
// with drafts actually accepted; the per-request opt-out; refused configurations.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "../common/test_model.h"
#include "../deepseek_v4/v4_fixture.h"
#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer {
namespace {

using engine::speculative::SpecPolicy;

std::unique_ptr<engine::Engine> tiny_engine(const std::string& spec, SpecPolicy policy = SpecPolicy::kFixed,
                                            bool batch_invariant = true, int k = 4) {
  auto model = runnertest::open_model();
  if (model == nullptr) return nullptr;
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.max_num_seqs = 32;
  cfg.max_num_batched_tokens = 1024;
  cfg.kv_cache_bytes = size_t{64} << 20;
  cfg.batch_invariant = batch_invariant;
  cfg.speculative.method = spec;
  cfg.speculative.num_draft_tokens = k;
  cfg.speculative.policy = policy;
  auto e = engine::Engine::create(std::move(model), runnertest::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

struct Out {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // chosen, then top-N, per token
  std::string text;
  engine::FinishReason reason = engine::FinishReason::kNone;
  int completion_tokens = 0;
  bool operator==(const Out& o) const {
    return tokens == o.tokens && text == o.text && reason == o.reason && completion_tokens == o.completion_tokens &&
           logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

// Runs all requests together (batch = their number) to the end.
std::vector<Out> run_all(engine::Engine& e, const std::vector<engine::GenerationRequest>& reqs) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = e.add_request(reqs[i]);
    EXPECT_TRUE(id.is_ok()) << id.status().message();
    if (id.is_ok()) index[*id] = i;
  }
  std::vector<Out> out(reqs.size());
  while (e.has_unfinished()) {
    for (const auto& o : e.step()) {
      Out& r = out[index.at(o.request_id)];
      EXPECT_TRUE(o.error.empty()) << o.error;
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (const auto& lp : o.new_logprobs) {
        r.logprobs.push_back(lp.logprob);
        for (const auto& [t, l] : lp.top) r.logprobs.push_back(l);
      }
      r.text += o.new_text;
      if (o.finished) {
        r.reason = o.finish_reason;
        r.completion_tokens = o.completion_tokens;
      }
    }
  }
  return out;
}

// Prompts that repeat themselves (so n-gram drafts exist) and ones that do not.
std::vector<engine::GenerationRequest> mixed_requests(int n) {
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    engine::GenerationRequest r;
    const int period = 2 + i % 5;
    for (int j = 0; j < 12 + 3 * (i % 7); ++j) r.prompt_ids.push_back(i % 3 == 0 ? 2 + (j * 37 + i) % 250 : 40 + (j % period) + i);
    r.max_tokens = 20 + i % 9;
    r.sampling.temperature = 0;
    r.sampling.logprobs = 2;
    if (i % 4 == 1) r.sampling.repetition_penalty = 1.3f;
    if (i % 4 == 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      r.sampling.has_seed = true;
    }
    if (i % 6 == 3) r.stop = {std::string(1, static_cast<char>(40 + i))};
    reqs.push_back(std::move(r));
  }
  return reqs;
}

void expect_same(const std::vector<Out>& want, const std::vector<Out>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(want[i] == got[i]) << "request " << i;
}

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
  cfg.speculative.method = "draft";
  EXPECT_FALSE(engine::speculative::validate(cfg.speculative).is_ok());
}

TEST(SpeculativeEngine, RefusesHybridKvStateModels) {
  // DeepSeek-V4's compressed and recent KV state is updated in place: no exact rollback yet.
  auto m = v4test::open_fixture("h2_mixed");
  ASSERT_TRUE(m);
  recipe::TokenizerSpec ts;
  for (int b = 0; b < 128; ++b) ts.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  ts.eos_id = 1;
  auto tok = recipe::Tokenizer::build(std::move(ts));
  ASSERT_TRUE(tok.is_ok());
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.kv_cache_bytes = size_t{4} << 20;
  cfg.speculative.method = "ngram";
  auto e = engine::Engine::create(std::move(m), std::shared_ptr<const recipe::Tokenizer>(std::move(*tok)), cfg);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("hybrid KV state"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace deepinfer
