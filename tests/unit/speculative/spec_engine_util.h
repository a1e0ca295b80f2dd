// Shared by the speculative engine tests on the tiny Llama fixture: an engine config, running
// requests to the end, mixed requests (greedy, seeded top-p, penalties, stop strings) and a
// bitwise comparison of outputs.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../runner/tiny_llama_fixture.h"
#include "deepinfer/engine/engine.h"

namespace deepinfer::spectest {

inline engine::EngineConfig engine_config(bool batch_invariant) {
  engine::EngineConfig cfg;
  cfg.num_threads = 1;
  cfg.max_num_seqs = 32;
  cfg.max_num_batched_tokens = 1024;
  cfg.kv_cache_bytes = size_t{64} << 20;
  cfg.batch_invariant = batch_invariant;
  return cfg;
}

// The tiny Llama fixture without speculation.
inline std::unique_ptr<engine::Engine> plain_engine(bool batch_invariant = true) {
  auto model = runnertest::open_model();
  if (model == nullptr) return nullptr;
  auto e = engine::Engine::create(std::move(model), runnertest::byte_tokenizer(), engine_config(batch_invariant));
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
inline std::vector<Out> run_all(engine::Engine& e, const std::vector<engine::GenerationRequest>& reqs) {
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
inline std::vector<engine::GenerationRequest> mixed_requests(int n) {
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

inline void expect_same(const std::vector<Out>& want, const std::vector<Out>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(want[i] == got[i]) << "request " << i;
}

}  // namespace deepinfer::spectest
