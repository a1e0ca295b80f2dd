// Sink attention: every SIMD variant against the double-precision scalar reference, over head
// sizes with and without tails, key counts from 0 to a few hundred, with and without sinks, and
// score ranges where the sink dominates or vanishes.
#include "deepinfer/kernels/cpu/sink_attention.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace deepinfer::kernels {
namespace {

struct Case {
  int heads, dim;
  int64_t keys;
  bool sink;
  float spread;  // scale of q and k: larger = peakier softmax
};

TEST(SinkAttention, SimdMatchesReference) {
  std::mt19937 rng(7);
  const Case cases[] = {{1, 16, 1, true, 1},   {4, 16, 7, true, 1},    {2, 20, 33, false, 1},
                        {8, 32, 130, true, 3}, {3, 512, 300, true, 1}, {2, 13, 5, false, 1},
                        {2, 64, 0, true, 1},   {2, 64, 0, false, 1},   {4, 24, 17, true, 0.01f}};
  for (const Case& c : cases) {
    const auto q = testing::random_vec(size_t(c.heads) * c.dim, rng, -c.spread, c.spread);
    std::vector<std::vector<float>> rows;
    std::vector<const float*> keys;
    for (int64_t j = 0; j < c.keys; ++j) rows.push_back(testing::random_vec(c.dim, rng, -c.spread, c.spread));
    for (const auto& r : rows) keys.push_back(r.data());
    const auto sinks = testing::random_vec(c.heads, rng, -2, 4);
    SinkAttentionParams p{};
    p.q = q.data();
    p.keys = keys.data();
    p.n_keys = c.keys;
    p.n_heads = c.heads;
    p.head_dim = c.dim;
    p.sinks = c.sink ? sinks.data() : nullptr;
    p.scale = 1.0f / std::sqrt(float(c.dim));
    std::vector<float> ref(size_t(c.heads) * c.dim, -1), scores(std::max<int64_t>(c.keys, 1));
    p.out = ref.data();
    p.scores = scores.data();
    sink_attention_reference(p);
    for (IsaLevel isa : testing::simd_levels()) {
      std::vector<float> got(ref.size(), -1);
      p.out = got.data();
      sink_attention_with_isa(p, isa);
      EXPECT_LT(testing::max_norm_err(got.data(), ref.data(), ref.size()), 2e-6)
          << "isa " << static_cast<int>(isa) << " heads " << c.heads << " dim " << c.dim << " keys "
          << c.keys << " sink " << c.sink;
    }
  }
}

}  // namespace
}  // namespace deepinfer::kernels
