// Greedy drafting shared by the drafters with weights (draft model, MTP head): the argmax of a
// logits row with its probability, and the probability bucketed into the confidence signal
// DSpark's acceptance estimate is kept by (dspark_policy.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace deepinfer::engine::speculative {

struct GreedyDraft {
  int32_t token = -1;  // -1: non-finite logits
  float prob = 0;
};

inline GreedyDraft greedy_draft(const float* logits, int32_t vocab) {
  GreedyDraft a;
  float best = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < vocab; ++i)
    if (logits[i] > best) best = logits[i], a.token = i;
  if (a.token < 0 || !std::isfinite(best)) return {};
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - best));
  if (!std::isfinite(sum)) return {};
  a.prob = static_cast<float>(1.0 / sum);
  return a;
}

inline int signal_of(float p) { return p >= 0.9f ? 4 : p >= 0.7f ? 3 : p >= 0.4f ? 2 : 1; }

}  // namespace deepinfer::engine::speculative
