// logit_bias, repetition penalty (HF/vLLM: divide positive logits, multiply negative ones, for
// every token seen in prompt or output) and OpenAI frequency/presence penalties (output only),
// plus validation of SamplingParams.
#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/engine/sampler.h"

namespace deepinfer::engine {

Status validate_sampling_params(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return invalid_argument("temperature must be a finite number >= 0, got {}", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1], got {}", p.top_p);
  if (p.top_k < 0) return invalid_argument("top_k must be >= 0 (0 = off), got {}", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid_argument("min_p must be in [0, 1], got {}", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return invalid_argument("repetition_penalty must be > 0, got {}", p.repetition_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return invalid_argument("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return invalid_argument("presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
  if (p.logprobs < -1 || p.logprobs > 20)
    return invalid_argument("logprobs must be in [0, 20] (or -1 for off), got {}", p.logprobs);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size)
      return invalid_argument("logit_bias token {} is outside the vocabulary of {}", id, vocab_size);
    if (!(bias >= -100.0f && bias <= 100.0f))
      return invalid_argument("logit_bias for token {} must be in [-100, 100], got {}", id, bias);
  }
  return Status::ok();
}

namespace detail {

void apply_bias_and_penalties(float* logits, int32_t vocab, const SamplingParams& params,
                              const SamplerState& history) {
  for (const auto& [id, bias] : params.logit_bias)
    if (id >= 0 && id < vocab) logits[id] += bias;

  const bool rep = params.repetition_penalty != 1.0f;
  const bool freq = params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  if (!rep && !freq) return;
  thread_local std::vector<int32_t> ids;
  auto sorted_in_vocab = [&](std::span<const int32_t> src) {
    ids.clear();
    for (int32_t t : src)
      if (t >= 0 && t < vocab) ids.push_back(t);
    std::sort(ids.begin(), ids.end());
  };
  if (rep) {
    sorted_in_vocab(history.tokens);
    const float rp = params.repetition_penalty;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0 && ids[i] == ids[i - 1]) continue;
      float& l = logits[ids[i]];
      l = l > 0.0f ? l / rp : l * rp;
    }
  }
  if (freq) {
    sorted_in_vocab(history.generated());
    for (size_t i = 0; i < ids.size();) {
      size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      logits[ids[i]] -= static_cast<float>(j - i) * params.frequency_penalty + params.presence_penalty;
      i = j;
    }
  }
}

}  // namespace detail
}  // namespace deepinfer::engine
