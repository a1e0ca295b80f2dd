// The MTP drafter on the tiny DeepSeek-V3 fixtures with an MTP layer (dense_heavy, moe_yarn;
// tests/reference/make_tiny_deepseek_v3.py): its drafts are the MTP head's own greedy tokens
// (first draft from the target's hidden state, chained drafts from the MTP layer's output), it
// rolls back to what a fresh drafter proposes after a rejection, engine outputs are bitwise
// identical to non-speculative decoding at batch 32 and 1 with drafts accepted, and a model
// without the layer is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../deepseek_v3/ds_fixture.h"
#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/speculative/mtp_drafter.h"
#include "spec_engine_util.h"

namespace deepinfer {
namespace {

using engine::speculative::ComputedSpan;
using engine::speculative::Draft;
using engine::speculative::Drafter;
using engine::speculative::DraftInput;
using engine::speculative::SpecPolicy;

std::unique_ptr<engine::Engine> v3_engine(const std::string& fixture, const std::string& method,
                                          SpecPolicy policy = SpecPolicy::kFixed,
                                          bool batch_invariant = true) {
  auto m = dstest::open_dir(dstest::fixture_dir(fixture));
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  engine::EngineConfig cfg = spectest::engine_config(batch_invariant);
  cfg.speculative.method = method;
  cfg.speculative.policy = policy;
  auto e = engine::Engine::create(std::move(m).value(), runnertest::byte_tokenizer(), cfg);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

// Every request alone (batch 1), in order.
std::vector<spectest::Out> run_one_by_one(engine::Engine& e,
                                          const std::vector<engine::GenerationRequest>& reqs) {
  std::vector<spectest::Out> out;
  for (const auto& r : reqs) out.push_back(spectest::run_all(e, {r})[0]);
  return out;
}

// Prompts below the fixtures' 256 positions (moe_yarn) with their longest continuation.
std::vector<engine::GenerationRequest> requests(int n) {
  auto reqs = spectest::mixed_requests(n);
  for (auto& r : reqs) r.max_tokens = std::min(r.max_tokens, 40);
  return reqs;
}

class MtpSpeculation : public ::testing::TestWithParam<const char*> {};

TEST_P(MtpSpeculation, SameOutputsAtBatch32And1WithDraftsAccepted) {
  auto plain = v3_engine(GetParam(), "");
  auto fixed = v3_engine(GetParam(), "mtp", SpecPolicy::kFixed);
  auto dspark = v3_engine(GetParam(), "mtp", SpecPolicy::kDspark);
  ASSERT_TRUE(plain && fixed && dspark);
  const auto reqs = requests(32);  // greedy, seeded top-p, penalties, stop strings
  const auto want = spectest::run_all(*plain, reqs);
  spectest::expect_same(want, spectest::run_all(*fixed, reqs));
  spectest::expect_same(want, spectest::run_all(*dspark, reqs));
  const auto want1 = run_one_by_one(*plain, reqs);
  spectest::expect_same(want1, run_one_by_one(*fixed, reqs));
  const auto* st = fixed->spec_stats();
  ASSERT_NE(st, nullptr);
  EXPECT_GT(st->verified, 200);
  // Random tiny weights: the MTP head agrees with the model now and then (it learned nothing),
  // but it does, and an accepted draft is an output token made without its own step.
  EXPECT_GT(st->accepted, 0);
  EXPECT_GT(st->draft_seconds, 0);
  std::printf("%s mtp: %lld verified, %lld accepted\n", GetParam(),
              static_cast<long long>(st->verified), static_cast<long long>(st->accepted));
}

TEST_P(MtpSpeculation, GreedyTokensSameWithoutBatchInvarianceAndSeedsReproduce) {
  auto plain = v3_engine(GetParam(), "", SpecPolicy::kFixed, false);
  auto mtp = v3_engine(GetParam(), "mtp", SpecPolicy::kDspark, false);
  ASSERT_TRUE(plain && mtp);
  auto reqs = requests(16);
  const auto want = spectest::run_all(*plain, reqs);
  const auto got = spectest::run_all(*mtp, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].sampling.temperature == 0 && reqs[i].sampling.repetition_penalty == 1.0f) {
      EXPECT_EQ(want[i].tokens, got[i].tokens) << "request " << i;
    }
  }
  const auto again = spectest::run_all(*mtp, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].sampling.has_seed) {
      EXPECT_EQ(got[i].tokens, again[i].tokens) << "seeded request " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, MtpSpeculation, ::testing::Values("dense_heavy", "moe_yarn"));

// The target's forward over `ids` (one batch-invariant prefill), leaving its hidden states in
// the model for the drafter to copy.
void target_forward(model::DeepseekV3& m, const std::vector<int32_t>& ids, ThreadPool& pool) {
  const int n = static_cast<int>(ids.size());
  model::KvCache cache = model::KvCache::allocate(m.kv_cache_spec(), (n + 15) / 16, 16);
  dstest::PagedSeq s{ids, {}, 0};
  for (int b = 0; b < (n + 15) / 16; ++b) s.blocks.push_back(b);
  ForwardBatch b;
  dstest::add_step(b, s, n, 16);
  std::vector<float> logits(size_t(n) * m.config().vocab_size);
  model::ForwardContext ctx{&pool, true};
  ASSERT_TRUE(m.forward(b, cache, ctx, logits.data()).is_ok());
}

std::unique_ptr<Drafter> drafter_for(model::DeepseekV3& m, ThreadPool& pool) {
  engine::speculative::DraftTarget t;
  t.config = &m.config();
  t.pool = &pool;
  t.num_kv_blocks = 64;
  t.max_num_seqs = 4;
  t.batch_invariant = true;
  auto d = engine::speculative::make_mtp_drafter(m, t);
  EXPECT_TRUE(d.is_ok()) << d.status().message();
  return d.is_ok() ? std::move(*d) : nullptr;
}

std::vector<int32_t> propose(Drafter& d, int64_t seq, const std::vector<int32_t>& tokens, int k) {
  const DraftInput in{seq, tokens, k};
  return d.propose({&in, 1})[0].tokens;
}

int32_t argmax(const std::vector<float>& v, size_t row, size_t vocab) {
  const auto* p = v.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(p, p + vocab) - p);
}

TEST(MtpDrafter, DraftsAreTheMtpHeadsChainedGreedyTokens) {
  auto m = dstest::open_fixture("dense_heavy");
  ASSERT_NE(m, nullptr);
  ThreadPool pool(1);
  auto drafter = drafter_for(*m, pool);
  ASSERT_NE(drafter, nullptr);
  const std::vector<int32_t> ids = {5,  17,  99, 3,  42, 42, 7,  130, 64, 9,
                                    11, 200, 1,  77, 31, 8,  90, 2,   66, 18};
  const int L = static_cast<int>(ids.size());
  // The target has computed positions 0 .. L-2; ids[L-1] is the token it sampled last.
  target_forward(*m, {ids.begin(), ids.end() - 1}, pool);
  const std::vector<float> hidden = m->final_hidden();
  const ComputedSpan span{7, 0, L - 1, 0};
  drafter->target_computed({&span, 1});
  const std::vector<int32_t> drafts = propose(*drafter, 7, ids, 3);
  ASSERT_EQ(drafts.size(), 3u);

  // By hand: MTP position i takes token ids[i + 1] and the target's hidden state at i; the last
  // row's argmax is the first draft; each further draft takes the draft before it and the MTP
  // layer's own output hidden state.
  const size_t V = static_cast<size_t>(m->config().vocab_size),
               H = static_cast<size_t>(m->config().hidden_size);
  model::KvCache cache = model::KvCache::allocate(m->mtp_kv_cache_spec(), 4, 16);
  dstest::PagedSeq s{std::vector<int32_t>(ids.begin() + 1, ids.end()), {0, 1, 2, 3}, 0};
  model::ForwardContext ctx{&pool, true};
  ForwardBatch b;
  dstest::add_step(b, s, L - 1, 16);
  std::vector<float> logits(size_t(L - 1) * V), out(size_t(L - 1) * H);
  ASSERT_TRUE(m->mtp_forward(b, hidden.data(), cache, ctx, logits.data(), out.data()).is_ok());
  std::vector<int32_t> want = {argmax(logits, size_t(L - 2), V)};
  std::vector<float> prev(out.end() - static_cast<std::ptrdiff_t>(H), out.end());
  for (int j = 1; j < 3; ++j) {
    s.ids.push_back(want.back());
    ForwardBatch c;
    dstest::add_step(c, s, 1, 16);
    std::vector<float> l(V), o(H);
    ASSERT_TRUE(m->mtp_forward(c, prev.data(), cache, ctx, l.data(), o.data()).is_ok());
    want.push_back(argmax(l, 0, V));
    prev = o;
  }
  EXPECT_EQ(drafts, want);
}

TEST(MtpDrafter, AfterARejectionDraftsAsAFreshDrafter) {
  auto m = dstest::open_fixture("moe_yarn");
  ASSERT_NE(m, nullptr);
  ThreadPool pool(1);
  auto drafter = drafter_for(*m, pool);
  ASSERT_NE(drafter, nullptr);
  std::vector<int32_t> ids = {4, 8, 15, 16, 23, 42, 108, 3, 3, 3, 250, 77};
  const int L = static_cast<int>(ids.size());
  target_forward(*m, {ids.begin(), ids.end() - 1}, pool);
  const ComputedSpan prefill{1, 0, L - 1, 0};
  drafter->target_computed({&prefill, 1});
  const std::vector<int32_t> d = propose(*drafter, 1, ids, 4);
  ASSERT_EQ(d.size(), 4u);
  // The step verifies ids[L-1] and the four drafts; the first is accepted, the second rejected
  // (the target's token there is another one).
  std::vector<int32_t> verified = ids;
  verified.insert(verified.end(), d.begin(), d.end());
  target_forward(*m, verified, pool);
  const ComputedSpan step{1, L - 1, 5, L - 1};
  drafter->target_computed({&step, 1});
  std::vector<int32_t> now = ids;
  now.push_back(d[0]);
  now.push_back((d[1] + 1) % 256);
  const std::vector<int32_t> continued = propose(*drafter, 1, now, 4);

  auto fresh = drafter_for(*m, pool);
  target_forward(*m, {now.begin(), now.end() - 1}, pool);
  const ComputedSpan all{1, 0, static_cast<int>(now.size()) - 1, 0};
  fresh->target_computed({&all, 1});
  EXPECT_EQ(continued, propose(*fresh, 1, now, 4));
  // A sequence the drafter never saw computed gets no drafts (no hidden state to start from).
  EXPECT_TRUE(propose(*fresh, 2, now, 4).empty());
}

TEST(MtpSpeculation, RefusedOnAModelWithoutTheLayer) {
  auto m = dstest::open_dir(dstest::fixture_dir("no_qlora"));  // num_nextn_predict_layers 0
  ASSERT_TRUE(m.is_ok());
  engine::EngineConfig cfg = spectest::engine_config(true);
  cfg.speculative.method = "mtp";
  auto e = engine::Engine::create(std::move(m).value(), runnertest::byte_tokenizer(), cfg);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);  // the file's property: exit status 1
  EXPECT_NE(e.status().message().find("no MTP layer"), std::string::npos) << e.status().message();
  // A dense Llama has no MTP head at all.
  auto llama = runnertest::open_model();
  ASSERT_NE(llama, nullptr);
  auto e2 = engine::Engine::create(std::move(llama), runnertest::byte_tokenizer(), cfg);
  ASSERT_FALSE(e2.is_ok());
  EXPECT_NE(e2.status().message().find("multi-token-prediction head"), std::string::npos)
      << e2.status().message();
}

}  // namespace
}  // namespace deepinfer
