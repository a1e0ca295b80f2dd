// Lossless verification on hand-made logits: greedy accept/reject and the bonus token, the
// history penalties and grammar masks see at each draft position, and with temperature a
// chi-square test that the emitted tokens follow the target's distribution (and that every
// seed gives the token the non-speculative sampler gives).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "deepinfer/engine/sampler.h"
#include "deepinfer/engine/speculative/verify.h"

namespace deepinfer::engine::speculative {
namespace {

constexpr int32_t kVocab = 8;

std::vector<float> rows(std::initializer_list<std::vector<float>> r) {
  std::vector<float> out;
  for (const auto& x : r) out.insert(out.end(), x.begin(), x.end());
  return out;
}

SamplingRow greedy_row(std::vector<int32_t> drafts) {
  SamplingRow row;
  row.params.temperature = 0;
  row.params.logprobs = 0;
  row.draft.tokens = std::move(drafts);
  return row;
}

TEST(VerifyDrafts, GreedyAcceptsWhileDraftIsTheArgmaxThenTakesTheTargetsToken) {
  const std::vector<float> lg = rows({{0, 0, 5, 0, 0, 0, 0, 0},    // argmax 2
                                      {0, 0, 0, 4, 0, 0, 0, 0},    // argmax 3
                                      {0, 0, 0, 0, 0, 0, 7, 0}});  // argmax 6
  SampledRow all = verify_drafts(lg.data(), kVocab, 3, greedy_row({2, 3}));
  ASSERT_EQ(all.accepted.size(), 2u);
  EXPECT_EQ(all.accepted[0].token, 2);
  EXPECT_EQ(all.accepted[1].token, 3);
  EXPECT_EQ(all.token, 6);  // the bonus token
  // Logprobs of accepted tokens are the sampler's own.
  SamplingParams p = greedy_row({}).params;
  EXPECT_EQ(all.accepted[1].logprob, sample(lg.data() + kVocab, kVocab, p, {}, 0, 1, nullptr).logprob);

  SampledRow cut = verify_drafts(lg.data(), kVocab, 3, greedy_row({2, 4}));
  ASSERT_EQ(cut.accepted.size(), 1u);
  EXPECT_EQ(cut.token, 3);  // the target's token where the draft was wrong
  SampledRow none = verify_drafts(lg.data(), kVocab, 3, greedy_row({1, 3}));
  EXPECT_TRUE(none.accepted.empty());
  EXPECT_EQ(none.token, 2);
}

TEST(VerifyDrafts, PenaltiesSeeTheDraftsBeforeEachPosition) {
  const std::vector<float> lg = rows({{0, 0, 5, 0, 0, 0, 0, 0}, {0, 0, 5, 4.9f, 0, 0, 0, 0}});
  SamplingRow row = greedy_row({2});
  row.params.repetition_penalty = 2.0f;  // 5 -> 2.5 for a token already seen
  row.history = {7};
  row.num_prompt = 1;
  SampledRow out = verify_drafts(lg.data(), kVocab, 2, row);
  ASSERT_EQ(out.accepted.size(), 1u);
  EXPECT_EQ(out.token, 3);  // 2 was drafted (and accepted) just before: penalized
}

TEST(VerifyDrafts, GrammarMaskAtEachPositionAndNonFiniteLogits) {
  const std::vector<float> lg = rows({{0, 0, 5, 0, 0, 0, 0, 0}, {0, 0, 0, 4, 3, 0, 0, 0}});
  SamplingRow row = greedy_row({2});
  row.draft.allowed_masks = {{0xFFu & ~(1u << 3)}};  // after draft 2: token 3 forbidden
  SampledRow out = verify_drafts(lg.data(), kVocab, 2, row);
  ASSERT_EQ(out.accepted.size(), 1u);
  EXPECT_EQ(out.token, 4);
  std::vector<float> bad = lg;
  bad[kVocab + 1] = NAN;
  out = verify_drafts(bad.data(), kVocab, 2, greedy_row({2}));
  EXPECT_FALSE(out.error.empty());
  EXPECT_TRUE(out.accepted.empty());
}

// Pearson chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    x += (counts[i] - e) * (counts[i] - e) / e;
  }
  return x;
}

std::vector<double> softmax(const float* lg, float t) {
  std::vector<double> p(kVocab);
  double s = 0;
  for (int i = 0; i < kVocab; ++i) s += p[static_cast<size_t>(i)] = std::exp(lg[i] / t);
  for (double& x : p) x /= s;
  return p;
}

TEST(VerifyDrafts, SampledTokensFollowTheTargetDistribution) {
  // The draft (2) gets 40% of the first position's mass; the second draft (0) 25% of the next.
  const std::vector<float> lg = rows({{0.1f, 0.4f, 1.3f, 0.2f, -0.5f, 0.0f, 0.6f, -1.0f},
                                      {0.9f, 0.2f, 0.6f, 0.5f, 0.3f, -0.2f, 0.1f, 0.4f},
                                      {0, 0, 0, 0, 0, 0, 0, 0}});
  constexpr float kT = 0.9f;
  constexpr int kSeeds = 20000;
  std::vector<int> first(kVocab, 0), second(kVocab, 0);
  int n_second = 0;
  SamplingRow row;
  row.params.temperature = kT;
  row.params.has_seed = true;
  row.draft.tokens = {2, 0};
  for (int seed = 0; seed < kSeeds; ++seed) {
    row.params.seed = static_cast<uint64_t>(seed) * 7919u + 1u;
    const SampledRow out = verify_drafts(lg.data(), kVocab, 3, row);
    const int32_t t0 = out.accepted.empty() ? out.token : out.accepted[0].token;
    ++first[static_cast<size_t>(t0)];
    // Every seed emits the token the non-speculative sampler would draw at that step.
    ASSERT_EQ(t0, sample(lg.data(), kVocab, row.params, {}, 0, 0, nullptr).token) << seed;
    if (!out.accepted.empty()) {
      const int32_t t1 = out.accepted.size() > 1 ? out.accepted[1].token : out.token;
      ++second[static_cast<size_t>(t1)];
      ++n_second;
      ASSERT_EQ(t1, sample(lg.data() + kVocab, kVocab, row.params, {}, 0, 1, nullptr).token) << seed;
    }
    const SampledRow again = verify_drafts(lg.data(), kVocab, 3, row);
    ASSERT_EQ(again.token, out.token);
    ASSERT_EQ(again.accepted.size(), out.accepted.size());
  }
  // 7 degrees of freedom: P(chi2 > 24.32) = 0.001 under the null hypothesis.
  constexpr double kThreshold = 24.32;
  EXPECT_LT(chi_square(first, softmax(lg.data(), kT), kSeeds), kThreshold);
  ASSERT_GT(n_second, 5000);
  EXPECT_LT(chi_square(second, softmax(lg.data() + kVocab, kT), n_second), kThreshold);
}

}  // namespace
}  // namespace deepinfer::engine::speculative
