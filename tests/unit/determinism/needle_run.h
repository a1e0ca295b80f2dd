// The determinism tests' probe: one "needle" request run among others, and what it produced
// (tokens and logprobs compared bit for bit).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "deepinfer/engine/engine.h"

namespace deepinfer::testing {

struct NeedleOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // chosen token's logprob, then its top-N, per step
  int cached = 0;               // prompt tokens served by the prefix cache
  bool operator==(const NeedleOutput& o) const {
    return tokens == o.tokens && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

// Adds `others` to the engine with `needle` inserted before others[at] (at == size: last), runs
// everything to completion and returns the needle's output.
inline NeedleOutput run_needle(engine::Engine& e, const engine::GenerationRequest& needle,
                               const std::vector<engine::GenerationRequest>& others, size_t at) {
  int64_t needle_id = -1;
  for (size_t i = 0; i <= others.size(); ++i) {
    if (i == at) needle_id = *e.add_request(needle);
    if (i < others.size()) {
      EXPECT_TRUE(e.add_request(others[i]).is_ok());
    }
  }
  NeedleOutput out;
  while (e.has_unfinished()) {
    for (const auto& o : e.step()) {
      if (o.request_id != needle_id) continue;
      out.tokens.insert(out.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (const auto& lp : o.new_logprobs) {
        out.logprobs.push_back(lp.logprob);
        for (const auto& [id, p] : lp.top) out.logprobs.push_back(p);
      }
      if (o.finished) out.cached = o.cached_tokens;
    }
  }
  return out;
}

}  // namespace deepinfer::testing
