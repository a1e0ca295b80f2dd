// The sampler: greedy, reproducible seeded draws, the empirical distribution, each filter,
// the allowed mask in every mode, penalties, logprobs and parameter validation.
#include "deepinfer/engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace deepinfer::engine {
namespace {

SampleResult draw(const std::vector<float>& logits, const SamplingParams& p, uint64_t step = 0, uint64_t key = 1,
                  const uint32_t* mask = nullptr, const SamplerState& h = {}) {
  return sample(logits.data(), static_cast<int32_t>(logits.size()), p, h, key, step, mask);
}

std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n,
                                 const uint32_t* mask = nullptr) {
  std::map<int32_t, int> h;
  for (int s = 0; s < n; ++s) ++h[draw(logits, p, s, 1, mask).token];
  return h;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(draw({0.1f, 2.0f, -1.0f, 1.9f}, p).token, 1);
  EXPECT_EQ(draw({0.1f, 3.0f, 3.0f, 3.0f}, p).token, 1);
  p.logprobs = 0;  // the chosen token's logprob is computed only when asked for
  auto r = draw({0.0f, 0.0f}, p);
  EXPECT_NEAR(r.logprob, std::log(0.5f), 1e-6);
  p.logprobs = -1;
  p.temperature = 1.0f;
  p.top_k = 1;  // top_k 1 is greedy too
  EXPECT_EQ(draw({5.0f, 7.0f, 7.0f}, p).token, 1);
}

TEST(Sampler, SeedsReproduceAndDiffer) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0, 2);
  std::vector<float> logits(49152);
  for (auto& x : logits) x = nd(rng);
  SamplingParams p;
  p.seed = 1234;
  p.has_seed = true;
  p.top_p = 0.95f;
  std::vector<int32_t> a, b, c, d;
  for (uint64_t s = 0; s < 12; ++s) {
    a.push_back(draw(logits, p, s, /*key=*/1).token);
    b.push_back(draw(logits, p, s, /*key=*/99).token);  // seeded: request key does not matter
  }
  p.seed = 1235;
  for (uint64_t s = 0; s < 12; ++s) c.push_back(draw(logits, p, s).token);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Unseeded: keyed by request, so two requests differ and each one reproduces.
  p.has_seed = false;
  p.seed = 0;
  for (uint64_t s = 0; s < 12; ++s) d.push_back(draw(logits, p, s, 7).token);
  std::vector<int32_t> d2, e;
  for (uint64_t s = 0; s < 12; ++s) {
    d2.push_back(draw(logits, p, s, 7).token);
    e.push_back(draw(logits, p, s, 8).token);
  }
  EXPECT_EQ(d, d2);
  EXPECT_NE(d, e);
}

TEST(Sampler, DistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  for (float temp : {1.0f, 0.7f}) {
    SamplingParams p;
    p.temperature = temp;
    p.seed = 42;
    p.has_seed = true;
    const int n = 20000;
    auto h = histogram(logits, p, n);
    double z = 0;
    for (float l : logits) z += std::exp(l / temp);
    double chi2 = 0;
    for (int i = 0; i < 5; ++i) {
      const double expect = n * std::exp(logits[i] / temp) / z;
      chi2 += (h[i] - expect) * (h[i] - expect) / expect;
    }
    EXPECT_LT(chi2, 18.47) << "temp=" << temp;  // chi-square, 4 dof, p = 0.001
  }
}

TEST(Sampler, TopKTopPMinPRestrictTheSupport) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.15f), std::log(0.07f), std::log(0.03f)};
  SamplingParams p;
  p.seed = 3;
  p.has_seed = true;
  auto support = [&](const SamplingParams& q) {
    std::set<int32_t> s;
    for (auto& [t, c] : histogram(logits, q, 3000)) s.insert(t);
    return s;
  };
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1, 2, 3, 4}));
  SamplingParams k = p;
  k.top_k = 2;
  EXPECT_EQ(support(k), (std::set<int32_t>{0, 1}));
  SamplingParams tp = p;
  tp.top_p = 0.8f;  // 0.5 + 0.25 < 0.8 <= 0.9: keep three
  EXPECT_EQ(support(tp), (std::set<int32_t>{0, 1, 2}));
  tp.top_p = 0.5f;  // exactly the first token's mass
  EXPECT_EQ(support(tp), (std::set<int32_t>{0}));
  SamplingParams mp = p;
  mp.min_p = 0.2f;  // p >= 0.1: tokens 0,1,2
  EXPECT_EQ(support(mp), (std::set<int32_t>{0, 1, 2}));
  SamplingParams all = p;  // combined: top-k 4, then top-p 0.95 of the renormalized 4
  all.top_k = 4;
  all.top_p = 0.95f;
  EXPECT_EQ(support(all), (std::set<int32_t>{0, 1, 2, 3}));
  all.top_p = 0.9f;  // 0.9/0.97 -> keep 0.5+0.25+0.15 = 0.90/0.97 = 0.928 >= 0.9
  EXPECT_EQ(support(all), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, TopPOnLargeFlatVocabularyKeepsEnoughTokens) {
  std::vector<float> logits(49152, 0.0f);
  SamplingParams p;
  p.top_p = 0.5f;
  p.seed = 9;
  p.has_seed = true;
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 60; ++s) {
    int32_t t = draw(logits, p, s).token;
    seen.insert(t);
    ASSERT_LT(t, 24577);  // ties broken by id: the kept half is the lowest ids
  }
  EXPECT_GT(seen.size(), 55u);
}

TEST(Sampler, TopPKeepsExactlyTheSortedPrefix) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> logits(5000);
  for (auto& x : logits) x = nd(rng);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  SamplingParams p;
  p.top_p = 0.3f;
  p.seed = 2;
  p.has_seed = true;
  std::set<int32_t> expect;
  double cum = 0;
  for (int32_t id : order) {
    expect.insert(id);
    if ((cum += std::exp(static_cast<double>(logits[id])) / z) >= p.top_p) break;
  }
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 300; ++s) seen.insert(draw(logits, p, s).token);
  for (int32_t t : seen) EXPECT_TRUE(expect.count(t)) << t;
  EXPECT_GE(seen.size(), std::min<size_t>(expect.size(), 3));
  EXPECT_TRUE(seen.count(order[0]));
}

TEST(Sampler, MaskIsHonouredInEveryMode) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = static_cast<float>(100 - i) * 0.05f;
  std::vector<uint32_t> mask(4, 0);
  for (int t : {17, 40, 41, 99}) mask[t >> 5] |= 1u << (t & 31);
  std::vector<SamplingParams> modes(6);
  modes[0].temperature = 0;
  modes[1].top_k = 3;
  modes[2].top_p = 0.3f;
  modes[3].min_p = 0.5f;
  modes[4].temperature = 3.0f;
  modes[5].logprobs = 5;
  for (auto& p : modes) {
    p.seed = 5;
    p.has_seed = true;
    for (uint64_t s = 0; s < 200; ++s) {
      auto r = draw(logits, p, s, 1, mask.data());
      ASSERT_TRUE(r.token == 17 || r.token == 40 || r.token == 41 || r.token == 99) << r.token;
      for (auto& tl : r.top_logprobs) ASSERT_TRUE(tl.token == 17 || tl.token == 40 || tl.token == 41 || tl.token == 99);
    }
  }
  EXPECT_EQ(draw(logits, modes[0], 0, 1, mask.data()).token, 17);
  EXPECT_EQ(draw(logits, modes[5], 0, 1, mask.data()).top_logprobs.size(), 4u);
  std::vector<uint32_t> none(4, 0);
  EXPECT_EQ(draw(logits, modes[1], 0, 1, none.data()).token, -1);
}

TEST(Sampler, PenaltiesAndBias) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::vector<float> l = {2.0f, -2.0f, 2.0f, 1.0f};
  const std::vector<int32_t> hist = {0, 1, 1, 3, 3, 3};
  SamplerState h{hist, 2};  // prompt {0, 1}; generated {1, 3, 3, 3}
  detail::apply_bias_and_penalties(l.data(), 4, p, h);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 2.0f, 0.5f}));
  SamplingParams f;
  f.frequency_penalty = 0.5f;
  f.presence_penalty = 0.25f;
  f.logit_bias = {{2, -1.0f}};
  l = {2.0f, -2.0f, 2.0f, 1.0f};
  detail::apply_bias_and_penalties(l.data(), 4, f, h);
  // token 0 only in the prompt: untouched; 1 once in output; 3 three times; 2 biased.
  EXPECT_EQ(l, (std::vector<float>{2.0f, -2.75f, 1.0f, -0.75f}));
  // Greedy follows the processed logits.
  SamplingParams g = f;
  g.temperature = 0;
  EXPECT_EQ(sample(std::vector<float>{2.0f, -2.0f, 2.5f, 1.0f}.data(), 4, g, h, 1, 0, nullptr).token, 0);
}

TEST(Sampler, LogprobsAreLogSoftmaxBeforeTemperature) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.logprobs = 3;
  p.seed = 1;
  p.has_seed = true;
  auto r = draw(logits, p);
  double z = 0;
  for (float x : logits) z += std::exp(x);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
  EXPECT_EQ(r.top_logprobs[2].token, 0);
  EXPECT_NEAR(r.top_logprobs[0].logprob, 3.0 - std::log(z), 1e-5);
  EXPECT_NEAR(r.logprob, logits[r.token] - std::log(z), 1e-5);
  p.logprobs = -1;
  EXPECT_TRUE(draw(logits, p).top_logprobs.empty());
}

TEST(Sampler, ValidationNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(validate_sampling_params(p, 10).is_ok());
  p.top_p = 0.0f;
  auto s = validate_sampling_params(p, 10);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("top_p"), std::string::npos);
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(validate_sampling_params(p, 10).message().find("logit_bias"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_FALSE(validate_sampling_params(p, 10).is_ok());
}

}  // namespace
}  // namespace deepinfer::engine
