// DeepSeekMoE routing on hand-made scores (group limiting, selection-only bias, normalization,
// scaling) and the per-layer expert statistics the model collects.
#include <cmath>
#include <numeric>

#include "ds_fixture.h"
#include "deepinfer/model/moe.h"

namespace deepinfer {
namespace {

float logit(float p) { return std::log(p / (1.0f - p)); }

// 8 experts in 4 groups of 2; scores by expert:
//   g0: 0.9 0.1 (sum 1.0)  g1: 0.6 0.6 (1.2)  g2: 0.95 0.01 (0.96)  g3: 0.45 0.5 (0.95)
std::vector<float> hand_logits() {
  std::vector<float> p = {0.9f, 0.1f, 0.6f, 0.6f, 0.95f, 0.01f, 0.45f, 0.5f};
  for (float& v : p) v = logit(v);
  return p;
}

model::MoeRouting routing(bool norm, float scale) {
  model::MoeRouting r;
  r.n_experts = 8;
  r.top_k = 2;
  r.n_group = 4;
  r.topk_group = 2;
  r.norm_topk_prob = norm;
  r.routed_scaling_factor = scale;
  return r;
}

TEST(MoeRoute, TopExpertOutsideTheBestGroupsIsNotChosen) {
  const auto logits = hand_logits();
  int32_t idx[2];
  float w[2];
  model::moe_route(routing(false, 1.0f), logits.data(), nullptr, 1, idx, w);
  // Groups 1 and 0 win; expert 4 (0.95, the best single score) sits in group 2 and is out.
  // Experts 2 and 3 tie at 0.6: the lower index goes first.
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(idx[1], 2);
  EXPECT_NEAR(w[0], 0.9f, 1e-6f);
  EXPECT_NEAR(w[1], 0.6f, 1e-6f);
}

TEST(MoeRoute, BiasSteersSelectionButNotWeights) {
  const auto logits = hand_logits();
  std::vector<float> bias(8, 0.0f);
  bias[7] = 0.5f;  // group 3 becomes 0.45 + 1.0 = 1.45, the best; expert 7's choice score is 1.0
  int32_t idx[2];
  float w[2];
  model::moe_route(routing(true, 2.5f), logits.data(), bias.data(), 1, idx, w);
  EXPECT_EQ(idx[0], 7);
  EXPECT_EQ(idx[1], 2);
  // Weights use the unbiased scores 0.5 and 0.6, normalized, times 2.5.
  EXPECT_NEAR(w[0], 2.5f * 0.5f / 1.1f, 1e-5f);
  EXPECT_NEAR(w[1], 2.5f * 0.6f / 1.1f, 1e-5f);
}

TEST(MoeRoute, SingleGroupIsPlainTopK) {
  auto r = routing(false, 1.0f);
  r.n_group = 1;
  r.topk_group = 1;
  r.top_k = 3;
  const auto logits = hand_logits();
  int32_t idx[3];
  float w[3];
  model::moe_route(r, logits.data(), nullptr, 1, idx, w);
  EXPECT_EQ(idx[0], 4);
  EXPECT_EQ(idx[1], 0);
  EXPECT_EQ(idx[2], 2);
}

TEST(ExpertStats, CountsEveryRoutedTokenPerMoeLayer) {
  auto m = dstest::open_fixture("moe_yarn");  // layer 0 dense, layers 1-2 MoE (8 experts, top-3)
  ASSERT_NE(m, nullptr);
  const auto fx = dstest::expected("moe_yarn");
  const auto ids = fx["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool pool(2);
  m->reset_expert_stats();
  testing::all_position_logits(*m, ids, pool);
  const model::ExpertStats& st = m->expert_stats();
  ASSERT_EQ(st.num_experts(), 8);
  for (int l = 0; l < 3; ++l) {
    uint64_t total = 0;
    int used = 0;
    for (int e = 0; e < 8; ++e) {
      total += st.count(l, e);
      used += st.count(l, e) > 0;
    }
    if (l == 0) {
      EXPECT_EQ(total, 0u) << "dense layer";
    } else {
      EXPECT_EQ(total, ids.size() * 3) << "layer " << l;
      EXPECT_GE(used, 4) << "layer " << l << ": routing collapsed onto few experts";
    }
  }
  m->reset_expert_stats();
  for (int e = 0; e < 8; ++e) EXPECT_EQ(m->expert_stats().count(1, e), 0u);
}

}  // namespace
}  // namespace deepinfer
