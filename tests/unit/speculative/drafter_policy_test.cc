// The speculative layer's parts with no model: the n-gram drafter, the acceptance and step
// cost models, DSpark's selection, and the flag checks.
#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/engine/speculative/drafter.h"
#include "deepinfer/engine/speculative/dspark_policy.h"
#include "deepinfer/engine/speculative/speculator.h"

namespace deepinfer::engine::speculative {
namespace {

TEST(NgramDrafter, ProposesWhatFollowedTheLatestLongestMatch) {
  auto d = make_ngram_drafter(3, 1);
  //                      0  1  2  3  4  5  6  7  8  9 10
  std::vector<int32_t> t{5, 6, 7, 8, 9, 1, 6, 7, 2, 5, 6, 7};
  // Suffix [5 6 7] occurs at 0 (followed by 8 9 1 ...); [6 7] more recently at 6 but the
  // longest match wins.
  Draft x = d->propose(t, 3);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{8, 9, 1}));
  EXPECT_EQ(x.match_length, 3);
  // Capped by max_tokens and by the end of the history.
  EXPECT_EQ(d->propose(t, 1).tokens, (std::vector<int32_t>{8}));
  std::vector<int32_t> u{3, 4, 3};
  x = d->propose(u, 5);
  EXPECT_EQ(x.tokens, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(x.match_length, 1);
  EXPECT_TRUE(d->propose(std::vector<int32_t>{1, 2, 3}, 4).tokens.empty());
  EXPECT_TRUE(d->propose(t, 0).tokens.empty());
}

TEST(AcceptanceModel, LearnsPerPositionAndSequence) {
  AcceptanceModel m;
  EXPECT_NEAR(m.estimate(1, 0, 3), 0.5, 1e-9);  // the prior
  for (int i = 0; i < 50; ++i) m.observe(1, 3, 4, 4);  // long matches always accepted
  for (int i = 0; i < 50; ++i) m.observe(2, 1, 4, 0);  // single-token matches never
  EXPECT_GT(m.estimate(1, 0, 3), 0.9);
  EXPECT_GT(m.estimate(1, 3, 3), 0.9);
  EXPECT_LT(m.estimate(2, 0, 1), 0.1);
  // Position 1 of a short match was never tested (the first draft always failed): prior,
  // pulled down by the sequence's own record.
  EXPECT_LT(m.estimate(2, 1, 1), 0.5);
  m.forget(2);
  EXPECT_NEAR(m.estimate(2, 1, 1), 0.5, 1e-9);
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

TEST(DsparkSelect, VerifiesMoreWhenFewSequencesAndOnlyLikelyDraftsUnderLoad) {
  StepCostModel c;
  for (int i = 0; i < 40; ++i) {
    const int tokens = 1 + (i * 7) % 64;
    c.observe(tokens, 0.010 + 0.0005 * tokens);  // one token costs 5% of the fixed time
  }
  const std::vector<double> likely{0.9, 0.8, 0.7, 0.6};
  const std::vector<double> unlikely{0.2, 0.05, 0.01, 0.001};
  // One sequence: threshold ~ b * 1 / (a + b) ~ 0.05: all likely drafts, some unlikely ones.
  auto one = dspark_select({likely}, 1, 1, c);
  EXPECT_EQ(one[0], 4);
  auto one_u = dspark_select({unlikely}, 1, 1, c);
  EXPECT_EQ(one_u[0], 1);
  // 32 sequences: threshold ~ b * 32 / (a + 32 b) ~ 0.6.
  std::vector<std::vector<double>> full(16, likely);
  for (int i = 0; i < 16; ++i) full.push_back(unlikely);
  auto many = dspark_select(full, 32, 32, c);
  int verified = 0;
  for (int i = 0; i < 16; ++i) {
    EXPECT_GE(many[static_cast<size_t>(i)], 2) << i;
    EXPECT_LE(many[static_cast<size_t>(i)], 4) << i;
    verified += many[static_cast<size_t>(i)];
  }
  for (int i = 16; i < 32; ++i) EXPECT_EQ(many[static_cast<size_t>(i)], 0) << i;
  EXPECT_LT(verified, 64);
  // Without a cost fit yet: everything is verified.
  auto cold = dspark_select({unlikely}, 1, 1, StepCostModel{});
  EXPECT_EQ(cold[0], 4);
}

TEST(SpeculativeConfig, RefusesWhatIsNotBuiltAndBadK) {
  EXPECT_TRUE(validate(SpeculativeConfig{}).is_ok());
  EXPECT_TRUE(validate(SpeculativeConfig{"ngram", 4, SpecPolicy::kDspark}).is_ok());
  EXPECT_FALSE(validate(SpeculativeConfig{"ngram", 0, SpecPolicy::kDspark}).is_ok());
  EXPECT_FALSE(validate(SpeculativeConfig{"ngram", kMaxDraftTokens + 1, SpecPolicy::kDspark}).is_ok());
  const Status mtp = validate(SpeculativeConfig{"mtp", 4, SpecPolicy::kDspark});
  EXPECT_NE(mtp.message().find("not built"), std::string::npos) << mtp.message();
  EXPECT_FALSE(validate(SpeculativeConfig{"eagle", 4, SpecPolicy::kDspark}).is_ok());
  EXPECT_FALSE(parse_spec_policy("greedy").is_ok());
  EXPECT_EQ(*parse_spec_policy("fixed"), SpecPolicy::kFixed);
}

TEST(Speculator, FixedKeepsEveryDraftAndCountsVerifications) {
  Speculator s(SpeculativeConfig{"ngram", 3, SpecPolicy::kFixed});
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
