// Token sampling from one row of logits. Order: logit_bias, penalties (repetition as HF/vLLM;
// frequency/presence as OpenAI), allowed mask, temperature, top-k, top-p, min-p, draw.
//
// Reproducibility: the uniform draw is Philox4x32-10 keyed by params.seed with counter = (step,
// stream). With has_seed the stream is 0 (same seed + same prompt = same output, whichever
// request); without it the stream is request_key. No shared RNG state exists.
//
// Logprobs are the log-softmax of the logits after logit_bias, penalties and the allowed mask,
// before temperature and top-k/top-p/min-p truncation (what the model, as constrained, assigns;
// temperature 0 and 1 report the same numbers).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/sampling_params.h"

namespace deepinfer::engine {

struct SamplerState {                  // token history the penalties look at
  std::span<const int32_t> tokens;     // prompt ids followed by generated ids
  size_t n_prompt = 0;                 // how many of tokens are prompt; the rest are generated
  // Repetition penalty looks at all tokens; frequency/presence only at the generated ones.
  std::span<const int32_t> prompt() const { return tokens.first(std::min(n_prompt, tokens.size())); }
  std::span<const int32_t> generated() const { return tokens.subspan(std::min(n_prompt, tokens.size())); }
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;             // -1: the mask (with bias/penalties) left no finite logit
  float logprob = 0.0f;           // filled when params.logprobs >= 0 (or when sampling)
  std::vector<TokenLogprob> top_logprobs;  // [min(logprobs, allowed)] best first; empty if off
};

// allowed_mask: [ceil(vocab / 32)] bit i set = token i allowed; nullptr = all allowed.
// Expects validated params; an id outside the vocabulary in logit_bias or history is ignored.
SampleResult sample(const float* logits, int32_t vocab, const SamplingParams& params,
                            const SamplerState& history, uint64_t request_key, uint64_t step,
                            const uint32_t* allowed_mask);

namespace detail {
// Applies logit_bias and the three penalties in place (exposed for tests).
void apply_bias_and_penalties(float* logits, int32_t vocab, const SamplingParams& params,
                              const SamplerState& history);
}  // namespace detail

}  // namespace deepinfer::engine
