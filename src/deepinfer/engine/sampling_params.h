// Per-request sampling settings (OpenAI / vLLM semantics); validated once at admission. Every
// interface reads them through the table in sampling_fields.h, which also holds their names,
// ranges and per-interface defaults; the member defaults here are its HTTP/Python ones (a test
// keeps them equal).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::engine {

struct SamplingParams {
  float temperature = 1.0f;          // 0 = greedy (argmax, ties -> lowest id)
  float top_p = 1.0f;                // (0, 1]; 1 = off
  int top_k = 0;                     // 0 = off
  float min_p = 0.0f;                // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;   // HF/vLLM: > 1 discourages tokens seen in prompt or output
  float frequency_penalty = 0.0f;    // OpenAI: minus count * f for tokens in the output
  float presence_penalty = 0.0f;     // OpenAI: minus p for tokens present in the output
  uint64_t seed = 0;
  bool has_seed = false;             // false: the draw stream is keyed by the request instead
  int logprobs = -1;                 // top-N (id, logprob) per step; -1 = off, 0 = chosen only
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias added to its logit)
};

// Checks the table's ranges (sampling_fields.cc) and that logit_bias ids are < vocab_size.
Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size);

}  // namespace deepinfer::engine
