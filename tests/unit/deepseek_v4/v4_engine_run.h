// Running the DeepSeek-V4 fixtures through the engine in tests: a byte tokenizer (the fixtures
// have none; the engine only detokenizes), one greedy request with its logprobs and usage, and
// the KL of two next-token distributions over the reference's top tokens.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::v4test {

inline std::shared_ptr<const recipe::Tokenizer> byte_tokenizer() {
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 128; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 0;
  spec.eos_id = 1;
  auto t = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
}

struct Generated {
  std::vector<int32_t> tokens;
  std::vector<engine::LogprobEntry> logprobs;
  int cached = -1, replayed = -1;
};

// One greedy request alone (ignoring EOS), top-20 logprobs per token.
inline Generated generate(engine::Engine& e, const std::vector<int32_t>& prompt, int max_tokens,
                          engine::SwaRestore swa) {
  engine::GenerationRequest r;
  r.prompt_ids = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling.logprobs = 20;
  r.swa_restore = swa;
  Generated g;
  auto id = e.add_request(r);
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      g.tokens.insert(g.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      g.logprobs.insert(g.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      if (o.finished) g.cached = o.cached_tokens, g.replayed = o.replayed_tokens;
    }
  return g;
}

// Tokens and every logprob (chosen and top-20) bitwise equal.
inline void expect_bitwise_equal(const Generated& want, const Generated& got,
                                 const std::string& what) {
  ASSERT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t i = 0; i < want.logprobs.size(); ++i) {
    EXPECT_EQ(got.logprobs[i].token_id, want.logprobs[i].token_id) << what << ", token " << i;
    EXPECT_EQ(got.logprobs[i].logprob, want.logprobs[i].logprob) << what << ", token " << i;
    EXPECT_EQ(got.logprobs[i].top, want.logprobs[i].top) << what << ", token " << i;
  }
}

// KL(ref || got) of one position's next-token distributions over ref's top tokens, the rest
// of each lumped in one bucket (a lower bound of the full KL).
inline double top_kl(const engine::LogprobEntry& ref, const engine::LogprobEntry& got) {
  double kl = 0, p_top = 0, q_top = 0;
  for (const auto& [t, lp] : ref.top) {
    double q = std::exp(double(got.top.back().second));
    for (const auto& [u, lq] : got.top)
      if (u == t) q = std::exp(double(lq));
    const double p = std::exp(double(lp));
    p_top += p;
    q_top += q;
    kl += p * std::log(p / q);
  }
  if (p_top < 1) kl += (1 - p_top) * std::log((1 - p_top) / std::max(1e-12, 1 - q_top));
  return kl;
}

}  // namespace deepinfer::v4test
