// logit_bias, repetition penalty (HF/vLLM: divide positive logits, multiply negative ones, for
// every token seen in prompt or output) and OpenAI frequency/presence penalties (output only).
// (SamplingParams are validated in sampling_fields.cc, from the table of fields.)
#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/engine/sampler.h"

namespace deepinfer::engine {

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
