// Deterministic pseudo-random prompts of ordinary tokens for the benchmarks: distinct per
// `seq`, so the prefix cache cannot help unless a benchmark repeats one on purpose.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace deepinfer::tools {

inline std::vector<int32_t> synthetic_prompt(int len, int seq, int32_t vocab) {
  std::mt19937 rng(1000 + seq);
  std::uniform_int_distribution<int32_t> dist(100, std::min<int32_t>(vocab - 1, 30000));
  std::vector<int32_t> ids(len);
  for (auto& t : ids) t = dist(rng);
  return ids;
}

}  // namespace deepinfer::tools
