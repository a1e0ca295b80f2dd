// The speculative layer's parts with no model: the n-gram drafter, the acceptance and step
// cost models, DSpark's selection, and the flag checks.
#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/engine/speculative/drafter.h"
#include "deepinfer/engine/speculative/dspark_policy.h"
#include "deepinfer/engine/speculative/speculator.h"

namespace deepinfer::engine::speculative {
namespace {

Draft one(Drafter& d, std::span<const int32_t> tokens, int k) {
  return d.propose(std::vector<DraftInput>{{0, tokens, k}})[0];
}

SpeculativeConfig config(const std::string& method, int k, SpecPolicy policy, const std::string& draft_model = "") {
  SpeculativeConfig c;
  c.method = method;
  c.num_draft_tokens = k;
  c.policy = policy;
  c.draft_model = draft_model;
  return c;
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestLongestMatch) {
  auto d = make_ngram_drafter(3, 1);
  //                      0  1  2  3  4  5  6  7  8  9 10
  std::vector<int32_t> t{5, 6, 7, 8, 9, 1, 6, 7, 2, 5, 6, 7};
  // Suffix [5 6 7] occurs at 0 (followed by 8 9 1 ...); [6 7] more recently at 6 but the
  // longest match wins.
  Draft x = one(*d, t, 3);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{8, 9, 1}));
  EXPECT_EQ(x.match_length, 3);
  // Capped by max_tokens and by the end of the history.
  EXPECT_EQ(one(*d, t, 1).tokens, (std::vector<int32_t>{8}));
  std::vector<int32_t> u{3, 4, 3};
  x = one(*d, u, 5);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(x.match_length, 1);
  EXPECT_TRUE(one(*d, std::vector<int32_t>{1, 2, 3}, 4).tokens.empty());
  EXPECT_TRUE(one(*d, t, 0).tokens.empty());
}

TEST(NgramDrafter, ReportsHowFarBackTheSourceAgrees) {
  auto d = make_ngram_drafter(2, 1);
  //                      0  1  2  3  4  5  6  7  8  9
  std::vector<int32_t> t{9, 1, 2, 3, 4, 5, 8, 1, 2, 3};
  // [2 3] matched (n = 2) at 2; going back, [1 2 3] agrees too, 9 vs 8 does not.
  Draft x = one(*d, t, 2);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(x.match_length, 2);
  EXPECT_EQ(x.context_match, 3);
}

TEST(NgramDrafter, CountsHowManyOccurrencesAgreeOnEachDraft) {
  auto d = make_ngram_drafter(2, 1);
  //                      0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
  std::vector<int32_t> t{1, 2, 7, 8, 1, 2, 7, 9, 1, 2, 7, 8, 5, 1, 2};
  // [1 2] occurs at 8 (the source: 7 8 5 1), at 4 (7 9 ...) and at 0 (7 8 1 ...).
  Draft x = one(*d, t, 4);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{7, 8, 5, 1}));
  EXPECT_EQ(x.occurrences, 3);
  // Draft 0 (7): all three agree. Draft 1 (8): the three still follow the draft, two agree
  // (4 has 9). Draft 2 (5): 8 and 0 follow, only the source agrees (0 has 1). Draft 3: the
  // source alone follows.
  EXPECT_EQ(x.support, (std::vector<int>{3, 3, 2, 1}));
  EXPECT_EQ(x.agree, (std::vector<int>{3, 2, 1, 1}));
  EXPECT_EQ(x.distance, 5);  // the source's continuation starts 5 tokens from the end
  // A draft that runs to the end of the history (the source is the latest occurrence, so
  // every earlier one has a token wherever it does).
  //                      0  1  2  3  4  5  6
  std::vector<int32_t> u{4, 3, 4, 3, 4, 3, 4};
  x = one(*d, u, 4);  // [3 4] at 3 (source: 3 4, then the end) and at 1 (3 4 3 4)
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(x.occurrences, 2);
  EXPECT_EQ(x.support, (std::vector<int>{2, 2}));
  EXPECT_EQ(x.agree, (std::vector<int>{2, 2}));
  // One occurrence: it agrees with itself.
  std::vector<int32_t> w{5, 6, 7, 8, 6, 7};
  x = one(*d, w, 2);
  EXPECT_EQ(x.occurrences, 1);
  EXPECT_EQ(x.support, (std::vector<int>{1, 1}));
  EXPECT_EQ(x.agree, (std::vector<int>{1, 1}));
}

TEST(AcceptanceModel, ConvergesToTheObservedRate) {
  AcceptanceModel m;
  EXPECT_NEAR(m.estimate(1, 0, 3), 0.5, 1e-9);  // the prior
  // Sequences 1..100 each verify once (no previous outcome): 4 of every 5 first drafts accepted
  // at signal 6, 1 of every 5 at signal 1.
  for (int64_t s = 1; s <= 100; ++s) m.observe(s, std::vector<int>{6}, 1, s % 5 != 0 ? 1 : 0);
  for (int64_t s = 101; s <= 200; ++s) m.observe(s, std::vector<int>{1}, 1, s % 5 == 0 ? 1 : 0);
  EXPECT_NEAR(m.estimate(1000, 0, 6), 0.8, 0.03);
  EXPECT_NEAR(m.estimate(1000, 0, 1), 0.2, 0.03);
  EXPECT_NEAR(m.estimate(1000, 0, 3), 0.5, 1e-9);  // never seen
  // Conditional: draft 1 is counted only when draft 0 was accepted. 300 fresh sequences with
  // three drafts: accepted 3, 1, 0 in turn, so P(draft 0) = 2/3, P(draft 1 | draft 0) = 1/2,
  // P(draft 2 | drafts 0, 1) = 1.
  const int accepted[] = {3, 1, 0};
  for (int64_t s = 0; s < 300; ++s) m.observe(2000 + s, std::vector<int>{4}, 3, accepted[s % 3]);
  EXPECT_NEAR(m.estimate(9999, 0, 4), 2.0 / 3, 0.03);
  EXPECT_NEAR(m.estimate(9999, 1, 4), 0.5, 0.05);
  EXPECT_GT(m.estimate(9999, 2, 4), 0.95);
}

TEST(AcceptanceModel, KeepsSequencesByTheirLastOutcome) {
  // Sequences that just accepted every draft keep copying (90% accepted); those whose first
  // draft was just rejected stay off their source (10%).
  AcceptanceModel m;
  for (int64_t i = 0; i < 300; ++i) {
    m.observe(10000 + i, std::vector<int>{2}, 1, 1);  // last outcome: all accepted
    m.observe(10000 + i, std::vector<int>{2}, 1, i % 10 != 0 ? 1 : 0);  // ...and 90% go on
    m.observe(20000 + i, std::vector<int>{2}, 1, 0);  // last outcome: first rejected
    m.observe(20000 + i, std::vector<int>{2}, 1, i % 10 == 0 ? 1 : 0);  // ...and 10% recover
  }
  m.observe(3, std::vector<int>{2}, 1, 1);
  m.observe(4, std::vector<int>{2}, 1, 0);
  EXPECT_GT(m.estimate(3, 0, 2), 0.8);
  EXPECT_LT(m.estimate(4, 0, 2), 0.25);
  m.forget(4);  // a fresh sequence: the "no outcome yet" cell, where half were accepted
  EXPECT_NEAR(m.estimate(4, 0, 2), 0.5, 0.02);
}

TEST(AcceptanceModel, FollowsADriftingWorkload) {
  AcceptanceModel m;
  for (int i = 0; i < 1000; ++i) m.observe(100 + i, std::vector<int>{5}, 1, 1);
  EXPECT_GT(m.estimate(1, 0, 5), 0.95);
  // The workload changes: now drafts of this kind fail. Bounded counts let the estimate move
  // within a few hundred outcomes instead of the thousand already seen.
  for (int i = 0; i < 600; ++i) m.observe(5000 + i, std::vector<int>{5}, 1, 0);
  EXPECT_LT(m.estimate(1, 0, 5), 0.3);
}

TEST(AcceptanceModel, KeepsPerTokenSignalsApart) {
  // A draft model's drafts: the first (strong signal) is always accepted, the second (weak)
  // never; each signal's counts learn its own rate.
  AcceptanceModel m;
  for (int i = 0; i < 60; ++i) m.observe(i, std::vector<int>{4, 1}, 2, 1);
  EXPECT_GT(m.estimate(1000, 0, 4), 0.9);
  EXPECT_LT(m.estimate(1000, 1, 1), 0.1);
  EXPECT_NEAR(m.estimate(1000, 1, 4), 0.5, 1e-9);  // never seen at position 1
}

TEST(StepCostModel, FitsFixedAndPerTokenTime) {
  StepCostModel c;
  EXPECT_FALSE(c.ready());
  for (int i = 0; i < 40; ++i) {
    const int tokens = 1 + (i * 7) % 40;
    c.observe(tokens, 0.010 + 0.0005 * tokens);
  }
  ASSERT_TRUE(c.ready());
  EXPECT_NEAR(c.fixed_seconds(), 0.010, 1e-6);
  EXPECT_NEAR(c.per_token_seconds(), 0.0005, 1e-8);
  StepCostModel flat;  // every step the same size: no slope known, verification assumed free
  for (int i = 0; i < 10; ++i) flat.observe(8, 0.02);
  EXPECT_EQ(flat.per_token_seconds(), 0.0);
}

// A cost model where one token costs `per_token` of a 10 ms fixed step.
StepCostModel cost_with(double per_token) {
  StepCostModel c;
  for (int i = 0; i < 40; ++i) {
    const int tokens = 1 + (i * 7) % 64;
    c.observe(tokens, 0.010 + 0.010 * per_token * tokens);
  }
  return c;
}

TEST(DsparkSelect, KeepsLikelyDraftsAndCutsTheUnlikelyTail) {
  const StepCostModel cheap = cost_with(0.001);  // verification nearly free: the floor applies
  // A confident copy: all four kept.
  EXPECT_EQ(dspark_select({{0.95, 0.9, 0.85, 0.8}}, 1, 1, cheap)[0], 4);
  // Confident start, then the chain of estimates falls off: the tail is cut where the chance
  // the draft is emitted drops below the floor.
  EXPECT_EQ(dspark_select({{0.9, 0.6, 0.2, 0.01}}, 1, 1, cheap)[0], 3);
  // Unlikely from the start: only the first draft (always verified, so its estimate keeps
  // learning).
  EXPECT_EQ(dspark_select({{0.04, 0.001, 0.0001, 0.00001}}, 1, 1, cheap)[0], 1);
  EXPECT_EQ(dspark_select({{}}, 1, 1, cheap)[0], 0);
  // Without a cost fit yet: the floor too.
  EXPECT_EQ(dspark_select({{0.9, 0.6, 0.2, 0.01}}, 1, 1, StepCostModel{})[0], 3);
}

TEST(DsparkSelect, TheThresholdRisesUnderLoadWithinItsBand) {
  const StepCostModel c = cost_with(0.05);  // one token costs 5% of the fixed time
  const double one = dspark_threshold(2, 1.0, c);
  const double full = dspark_threshold(64, 32.0, c);
  EXPECT_LT(one, full);
  // The band: a nearly free token does not verify hopeless drafts, and a full batch still
  // verifies drafts that are more likely accepted than not.
  EXPECT_GE(one, dspark_threshold(2, 1.0, cost_with(0.0001)));
  EXPECT_EQ(dspark_threshold(2, 1.0, cost_with(0.0001)), dspark_threshold(2, 1.0, StepCostModel{}));
  EXPECT_EQ(full, dspark_threshold(64, 32.0, cost_with(10.0)));
  EXPECT_LT(full, 0.5);
  // A doubtful tail (0.08 emitted) is kept for one sequence when verification is cheap and
  // cut in a full batch; a likely draft (0.6) is kept in both.
  const std::vector<double> tail{0.9, 0.6, 0.08, 0.01};
  EXPECT_EQ(dspark_select({tail}, 1, 1, cost_with(0.001))[0], 3);
  const std::vector<std::vector<double>> batch(32, tail);
  const std::vector<int> many = dspark_select(batch, 32, 32, cost_with(0.05));
  for (int t : many) EXPECT_EQ(t, 2);
}

TEST(SpeculativeConfig, RefusesUnknownDraftersAndBadK) {
  EXPECT_TRUE(validate(SpeculativeConfig{}).is_ok());
  EXPECT_TRUE(validate(config("ngram", 4, SpecPolicy::kDspark)).is_ok());
  EXPECT_FALSE(validate(config("ngram", 0, SpecPolicy::kDspark)).is_ok());
  EXPECT_FALSE(validate(config("ngram", kMaxDraftTokens + 1, SpecPolicy::kDspark)).is_ok());
  // Whether the model has an MTP layer is the engine's check (mtp_test.cc), not the flags'.
  EXPECT_TRUE(validate(config("mtp", 4, SpecPolicy::kDspark)).is_ok());
  EXPECT_FALSE(validate(config("eagle", 4, SpecPolicy::kDspark)).is_ok());
  // The draft-model drafter needs its model, and the model needs the drafter.
  const Status no_model = validate(config("draft", 4, SpecPolicy::kDspark));
  EXPECT_EQ(no_model.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_model.message().find("needs --draft-model"), std::string::npos) << no_model.message();
  EXPECT_TRUE(validate(config("draft", 4, SpecPolicy::kDspark, "m.gguf")).is_ok());
  for (const char* method : {"", "ngram"}) {
    const Status stray = validate(config(method, 4, SpecPolicy::kDspark, "m.gguf"));
    EXPECT_EQ(stray.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(stray.message().find("--draft-model m.gguf: needs --speculative draft"), std::string::npos)
        << stray.message();
  }
  SpeculativeConfig kv_only = config("ngram", 4, SpecPolicy::kDspark);
  kv_only.draft_kv_cache_bytes = 1 << 20;
  EXPECT_FALSE(validate(kv_only).is_ok());
  EXPECT_FALSE(parse_spec_policy("greedy").is_ok());
  EXPECT_EQ(*parse_spec_policy("fixed"), SpecPolicy::kFixed);
}

TEST(Speculator, FixedKeepsEveryDraftAndCountsVerifications) {
  Speculator s(config("ngram", 3, SpecPolicy::kFixed));
  std::vector<int32_t> t{1, 2, 3, 4, 1, 2};
  auto d = s.propose({{7, t, 10}, {8, t, 0}}, 2);
  EXPECT_EQ(d[0], (std::vector<int32_t>{3, 4, 1}));
  EXPECT_TRUE(d[1].empty());  // no room under max_tokens
  s.observe(7, 3, 2);
  EXPECT_EQ(s.stats().drafted, 3);
  EXPECT_EQ(s.stats().verified, 3);
  EXPECT_EQ(s.stats().accepted, 2);
  EXPECT_EQ(s.stats().accepted_histogram[2], 1);
}

}  // namespace
}  // namespace deepinfer::engine::speculative

namespace deepinfer::engine::speculative {
namespace {

// Records what it was asked for; proposes that many tokens.
class CountingDrafter final : public Drafter {
 public:
  explicit CountingDrafter(std::vector<int>* asked) : asked_(asked) {}
  std::vector<Draft> propose(std::span<const DraftInput> seqs) override {
    std::vector<Draft> out;
    for (const DraftInput& s : seqs) {
      asked_->push_back(s.max_tokens);
      // The strongest signal a draft model reports (greedy_draft.h: probability >= 0.9).
      Draft& d = out.emplace_back();
      d.tokens.assign(static_cast<size_t>(s.max_tokens), 5);
      d.signals.assign(static_cast<size_t>(s.max_tokens), 4);
    }
    return out;
  }
  std::string_view name() const override { return "counting"; }

 private:
  std::vector<int>* asked_;
};

TEST(Speculator, DsparkAsksADraftModelOnlyForWhatItWouldVerify) {
  std::vector<int32_t> t{1, 2, 3};
  std::vector<DraftRequest> reqs;
  for (int64_t i = 0; i < 32; ++i) reqs.push_back({i, t, 100});
  auto asked_with = [&](const std::string& method, SpecPolicy policy) {
    std::vector<int> asked;
    Speculator s(config(method, 8, policy, method == "draft" ? "m.gguf" : ""),
                 std::make_unique<CountingDrafter>(&asked));
    // A step's time grows steeply with its tokens, and drafts are rarely accepted.
    for (int i = 0; i < 40; ++i) s.observe_forward(1 + i % 40, 0, 0.001 + 0.01 * (1 + i % 40));
    for (int round = 0; round < 3; ++round) {
      const auto drafts = s.propose(reqs, 32);
      for (int64_t i = 0; i < 32; ++i)
        if (!drafts[static_cast<size_t>(i)].empty())
          s.observe(i, static_cast<int>(drafts[static_cast<size_t>(i)].size()), 0);
    }
    asked.clear();
    (void)s.propose(reqs, 32);
    int total = 0;
    for (int a : asked) total += a;
    return total;
  };
  EXPECT_EQ(asked_with("draft", SpecPolicy::kFixed), 32 * 8);
  EXPECT_EQ(asked_with("ngram", SpecPolicy::kDspark), 32 * 8);  // n-gram drafting is free
  EXPECT_LT(asked_with("draft", SpecPolicy::kDspark), 32 * 8 / 4);
}

}  // namespace
}  // namespace deepinfer::engine::speculative
