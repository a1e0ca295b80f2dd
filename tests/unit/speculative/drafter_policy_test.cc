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
      out.push_back(Draft{std::vector<int32_t>(static_cast<size_t>(s.max_tokens), 5), 0, {}});
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
    for (int64_t i = 0; i < 32; ++i) s.observe(i, 8, 0);
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
