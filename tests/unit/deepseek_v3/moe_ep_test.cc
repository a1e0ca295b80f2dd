// The expert-parallel MoE path in one process: a one-rank group whose exchange runs the local
// experts directly. Logits equal the plain MoE's bit for bit, with contiguous experts and with
// EPLB replicas (rows of one expert through several slots); and the Zipf router skew.
#include <algorithm>
#include <cmath>

#include "deepinfer/model/moe.h"
#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/eplb.h"
#include "../common/loopback_ep_group.h"
#include "ds_fixture.h"

namespace deepinfer {
namespace {

class OneRankGroup final : public parallel::EpGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void exchange(int layer, const int32_t* dest, const float* x, int64_t n, int64_t hidden,
                float* y) override {
    ++exchanges;
    local_(layer, dest, x, n, y);
  }
  bool step_barrier(bool have_work) override { return have_work; }
  std::vector<std::string> gather_to_root(const std::string& mine) override { return {mine}; }
  bool all(bool mine) override { return mine; }
  std::string broadcast(const std::string& mine, bool) override { return mine; }
  int exchanges = 0;
};

TEST(MoeExpertParallel, OneRankGroupGivesTheSameLogitsBitForBit) {
  auto m = dstest::open_fixture("moe_yarn");  // 3 layers (1 dense), 8 experts top-3, MTP row 3
  ASSERT_NE(m, nullptr);
  const auto ids = dstest::expected("moe_yarn")["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool pool(1);
  m->reset_expert_stats();
  const std::vector<float> ref = testing::all_position_logits(*m, ids, pool);

  OneRankGroup group;
  auto contiguous = parallel::contiguous_placement(4, 8, 1);
  ASSERT_TRUE(contiguous.is_ok());
  group.set_placement(*contiguous);
  ASSERT_TRUE(m->set_expert_parallel(&group, {&pool, false}).is_ok());
  EXPECT_EQ(testing::all_position_logits(*m, ids, pool), ref);
  EXPECT_EQ(group.exchanges, 2);  // one per MoE layer

  // EPLB with 8 redundant slots from the load just counted: hot experts get replicas.
  std::vector<float> w;
  for (int l = 1; l <= 2; ++l)
    for (int e = 0; e < 8; ++e) w.push_back(static_cast<float>(m->expert_stats().count(l, e)));
  auto eplb = parallel::eplb_rebalance(
      w, 2, 8, {.num_physical = 16, .num_groups = 4, .num_nodes = 1, .num_gpus = 1});
  ASSERT_TRUE(eplb.is_ok());
  ASSERT_GE(eplb->max_replicas, 2);
  auto placed = parallel::placement_from_eplb(*eplb, {1, 2}, 4, 1);
  ASSERT_TRUE(placed.is_ok()) << placed.status().message();
  group.set_placement(*placed);
  EXPECT_EQ(testing::all_position_logits(*m, ids, pool), ref);
  ASSERT_TRUE(m->set_expert_parallel(nullptr, {&pool, false}).is_ok());
}

using testing::LoopbackGroup;

TEST(MoeExpertParallel, RebalanceMovesExpertsBetweenRanksAndKeepsLogitsBitForBit) {
  auto a = dstest::open_fixture("moe_yarn");  // rank 0; MoE rows 1, 2 and the MTP layer's 3
  auto b = dstest::open_fixture("moe_yarn");  // rank 1
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const auto ids = dstest::expected("moe_yarn")["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool pool(1);
  const std::vector<float> ref = testing::all_position_logits(*a, ids, pool);

  LoopbackGroup g0(0, nullptr), g1(1, &g0);
  g0.set_other(&g1);
  auto contiguous = parallel::contiguous_placement(4, 8, 2);
  ASSERT_TRUE(contiguous.is_ok());
  g0.set_placement(*contiguous);
  g1.set_placement(*contiguous);
  ASSERT_TRUE(a->set_expert_parallel(&g0, {&pool, false}).is_ok());
  ASSERT_TRUE(b->set_expert_parallel(&g1, {&pool, false}).is_ok());
  EXPECT_EQ(testing::all_position_logits(*a, ids, pool), ref);

  // Swap the halves and give experts 1 and 6 a replica on the other rank (10 slots).
  std::vector<int32_t> phy2log;
  for (int l = 0; l < 4; ++l)
    for (int32_t e : {4, 5, 6, 7, 1, 0, 1, 2, 3, 6}) phy2log.push_back(e);
  auto next = parallel::placement_from_phy2log(phy2log, 4, 8, 10, 2);
  ASSERT_TRUE(next.is_ok()) << next.status().message();
  auto s0 = g0.expert_stager()(*next, 0);
  auto s1 = g1.expert_stager()(*next, 1);
  ASSERT_TRUE(s0.is_ok() && s1.is_ok());
  // Rank 0 reads experts 1, 4, 5, 6, 7 and drops 0, 2, 3, in each of the 3 MoE rows.
  EXPECT_EQ(s0->loaded, 3 * 4);
  EXPECT_EQ(s0->dropped, 3 * 3);
  EXPECT_EQ(s1->loaded, 3 * 4);  // 0, 1, 2, 3 (6 it holds)
  EXPECT_EQ(s1->dropped, 3 * 3);  // 4, 5, 7
  // Staged, not installed: the old placement still runs on the old weights.
  EXPECT_EQ(testing::all_position_logits(*a, ids, pool), ref);
  s0->install();
  s1->install();
  g0.set_placement(*next);
  g1.set_placement(*next);
  EXPECT_EQ(testing::all_position_logits(*a, ids, pool), ref);
  auto again = g0.expert_stager()(*next, 0);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->loaded, 0);
  EXPECT_EQ(again->dropped, 0);
  ASSERT_TRUE(a->set_expert_parallel(nullptr, {&pool, false}).is_ok());  // every expert again
  EXPECT_EQ(testing::all_position_logits(*a, ids, pool), ref);
}

TEST(MoeExpertParallel, ZipfSkewLowersAllButOneExpertPerLayerDeterministically) {
  model::MoeWeights a, b;
  model::skew_router(a, 16, 3, 0.1f);
  model::skew_router(b, 16, 3, 0.1f);
  const float* x = static_cast<const float*>(a.score_bias.data);
  const float* y = static_cast<const float*>(b.score_bias.data);
  int zeros = 0;
  std::vector<float> sorted(x, x + 16);
  for (int e = 0; e < 16; ++e) {
    EXPECT_EQ(x[e], y[e]);
    zeros += x[e] == 0.0f;
    EXPECT_LE(x[e], 0.0f);
  }
  EXPECT_EQ(zeros, 1);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_FLOAT_EQ(sorted[0], -0.1f * std::log(16.0f));  // the least popular: rank 15
  model::MoeWeights c;
  model::skew_router(c, 16, 4, 0.1f);  // another layer: another order
  EXPECT_NE(std::vector<float>(x, x + 16),
            std::vector<float>(static_cast<const float*>(c.score_bias.data),
                               static_cast<const float*>(c.score_bias.data) + 16));
}

}  // namespace
}  // namespace deepinfer
