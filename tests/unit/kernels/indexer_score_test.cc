// Indexer scores: every SIMD variant against the scalar reference, over head sizes with and
// without tails, scores that relu cuts and ones it keeps.
#include "deepinfer/kernels/cpu/indexer_score.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

// One query's heads and weights and n random keys.
struct IndexerCase {
  std::vector<float> q, w;
  std::vector<std::vector<float>> rows;
  std::vector<const float*> keys;
  IndexerScoreParams p;
  IndexerCase(int heads, int dim, int n, std::mt19937& rng)
      : q(testing::random_vec(size_t(heads) * dim, rng)), w(testing::random_vec(heads, rng, -1, 2)) {
    for (int e = 0; e < n; ++e) rows.push_back(testing::random_vec(dim, rng));
    for (const auto& r : rows) keys.push_back(r.data());
    p = {q.data(), w.data(), heads, dim, 1.0f / std::sqrt(float(dim))};
  }
};

TEST(IndexerScore, SimdMatchesReference) {
  std::mt19937 rng(11);
  const int shapes[][2] = {{1, 8}, {4, 16}, {3, 20}, {64, 128}, {2, 13}, {8, 40}};
  for (const auto& shape : shapes) {
    const int heads = shape[0], dim = shape[1];
    const IndexerCase c(heads, dim, 37, rng);
    const IndexerScoreParams& p = c.p;
    const auto& keys = c.keys;
    std::vector<float> ref(keys.size());
    for (size_t e = 0; e < keys.size(); ++e) ref[e] = indexer_score_reference(p, keys[e]);
    for (IsaLevel isa : testing::simd_levels()) {
      std::vector<float> got(keys.size(), -7);
      indexer_scores_with_isa(p, keys.data(), static_cast<int64_t>(keys.size()), got.data(), isa);
      EXPECT_LT(testing::max_norm_err(got.data(), ref.data(), ref.size()), 1e-5)
          << "isa " << static_cast<int>(isa) << " heads " << heads << " dim " << dim;
    }
  }
}

// A key's score must not depend on how many keys are scored with it or where it sits among
// them (the SIMD variants score several keys at once): every key scored alone, bitwise equal.
TEST(IndexerScore, KeyScoreIndependentOfItsGroup) {
  std::mt19937 rng(12);
  const int shapes[][2] = {{8, 16}, {3, 20}, {64, 128}, {2, 13}};
  for (const auto& shape : shapes) {
    const int heads = shape[0], dim = shape[1];
    const IndexerCase c(heads, dim, 11, rng);
    const IndexerScoreParams& p = c.p;
    const auto& keys = c.keys;
    for (IsaLevel isa : testing::simd_levels()) {
      for (int64_t n = 1; n <= static_cast<int64_t>(keys.size()); ++n) {
        std::vector<float> all(static_cast<size_t>(n));
        indexer_scores_with_isa(p, keys.data(), n, all.data(), isa);
        for (int64_t e = 0; e < n; ++e) {
          float alone = 0;
          indexer_scores_with_isa(p, keys.data() + e, 1, &alone, isa);
          ASSERT_EQ(all[size_t(e)], alone) << "isa " << static_cast<int>(isa) << " heads " << heads
                                           << " dim " << dim << " n " << n << " key " << e;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
