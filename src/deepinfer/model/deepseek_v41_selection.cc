// Candidate blocks and top-k selection of a V4.1 index source (one query at a time).
#include "deepinfer/model/deepseek_v41_selection.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "deepinfer/base/check.h"

namespace deepinfer::model {
namespace {

// Indices [0, n) ordered best score first, ties to the lower index; only the first `k` sorted.
std::vector<int32_t> best_first(const std::vector<float>& score, const std::vector<int32_t>& among,
                                int k) {
  std::vector<int32_t> order = among;
  const size_t n = std::min<size_t>(static_cast<size_t>(k), order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  order.resize(n);
  return order;
}

}  // namespace

void v41_candidate_blocks(std::span<const float> scores, int64_t visible, int topk_blocks,
                          int block, std::span<uint8_t> keep) {
  DI_CHECK(keep.size() == scores.size() && block > 0 && topk_blocks >= 0,
           "v41_candidate_blocks: bad sizes");
  std::fill(keep.begin(), keep.end(), uint8_t{0});
  const int64_t n_visible = std::min<int64_t>(visible, static_cast<int64_t>(scores.size()));
  if (n_visible <= 0) return;
  const int64_t n_blocks = (n_visible + block - 1) / block;
  std::vector<float> block_score(n_blocks, -std::numeric_limits<float>::infinity());
  std::vector<int32_t> with_entries;
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int64_t e = b * block; e < std::min<int64_t>(n_visible, (b + 1) * block); ++e)
      block_score[b] = std::max(block_score[b], scores[e]);
    with_entries.push_back(static_cast<int32_t>(b));
  }
  block_score[(n_visible - 1) / block] =
      std::numeric_limits<float>::infinity();  // the newest: pinned
  for (int32_t b : best_first(block_score, with_entries, topk_blocks))
    for (int64_t e = int64_t{b} * block; e < std::min<int64_t>(n_visible, (int64_t{b} + 1) * block);
         ++e)
      keep[e] = 1;
}

int v41_select_topk(std::span<const float> scores, int64_t visible,
                    std::span<const uint8_t> candidates, int k, std::span<int32_t> out) {
  DI_CHECK(candidates.empty() || candidates.size() == scores.size(),
           "v41_select_topk: bad candidate mask");
  const int64_t n_visible = std::min<int64_t>(visible, static_cast<int64_t>(scores.size()));
  std::vector<int32_t> eligible;
  for (int64_t e = 0; e < n_visible; ++e)
    if (candidates.empty() || candidates[e]) eligible.push_back(static_cast<int32_t>(e));
  std::vector<float> score(scores.begin(), scores.begin() + std::max<int64_t>(n_visible, 0));
  std::vector<int32_t> picked = best_first(score, eligible, k);
  std::sort(picked.begin(), picked.end());
  DI_CHECK(out.size() >= picked.size(), "v41_select_topk: output too small");
  std::copy(picked.begin(), picked.end(), out.begin());
  return static_cast<int>(picked.size());
}

}  // namespace deepinfer::model
