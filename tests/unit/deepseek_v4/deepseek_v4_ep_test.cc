// DeepSeek-V4 under expert parallelism, two model ranks in one process (the loopback group):
// with the routed experts split across the ranks (hash layers included) the logits equal the
// single-process model's bit for bit, on every fixture (bf16, FP8 and FP4 experts); a live
// rebalance with redundant replicas stages only the experts each rank gains, leaves the running
// placement alone until installed, and keeps the logits bit for bit.
#include "../common/loopback_ep_group.h"
#include "deepinfer/model/deepseek_v4_moe.h"
#include "deepinfer/parallel/ep_group.h"
#include "v4_fixture.h"

namespace deepinfer {
namespace {

using testing::LoopbackGroup;

std::vector<float> logits_of(model::Model& m, const std::vector<int32_t>& ids, ThreadPool& pool) {
  return testing::all_position_logits(m, ids, pool, {}, {}, DType::kF32, /*batch_invariant=*/true);
}

// Experts layer `l` of `m` holds, ascending.
std::vector<int> held(const model::Model& m, int l) {
  const auto& moe = dynamic_cast<const model::DeepseekV4&>(m).weights().layers[size_t(l)].moe;
  std::vector<int> out;
  for (int e = 0; e < m.config().n_routed_experts; ++e)
    if (model::v4_expert_held(moe, e)) out.push_back(e);
  return out;
}

class DeepseekV4Ep : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepseekV4Ep, ExpertsSplitAcrossTwoRanksGiveTheSameLogitsBitForBit) {
  auto a = v4test::open_fixture(GetParam());  // rank 0
  auto b = v4test::open_fixture(GetParam());  // rank 1
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int L = a->config().num_layers, E = a->config().n_routed_experts;
  ASSERT_EQ(E, 4);
  const auto ids = v4test::expected(GetParam())["cases"][2]["ids"].get<std::vector<int32_t>>();
  ThreadPool pool(1);
  const std::vector<float> ref = logits_of(*a, ids, pool);

  LoopbackGroup g0(0, nullptr), g1(1, &g0);
  g0.set_other(&g1);
  auto contiguous = parallel::contiguous_placement(L + 1, E, 2);  // + the MTP row, unused by V4
  ASSERT_TRUE(contiguous.is_ok());
  g0.set_placement(*contiguous);
  g1.set_placement(*contiguous);
  ASSERT_TRUE(a->set_expert_parallel(&g0, {&pool, true}).is_ok());
  ASSERT_TRUE(b->set_expert_parallel(&g1, {&pool, true}).is_ok());
  for (int l = 0; l < L; ++l) {
    EXPECT_EQ(held(*a, l), (std::vector<int>{0, 1})) << "layer " << l;
    EXPECT_EQ(held(*b, l), (std::vector<int>{2, 3})) << "layer " << l;
  }
  EXPECT_EQ(logits_of(*a, ids, pool), ref);
  EXPECT_EQ(g0.exchanges, L);  // one per MoE layer
  EXPECT_GT(g0.rows_run, 0);
  EXPECT_GT(g1.rows_run, 0);  // rank 1's experts ran rank 0's rows
  EXPECT_EQ(g0.rows_run + g1.rows_run, int64_t{L} * int64_t(ids.size()) * 2);  // top-2
  EXPECT_EQ(logits_of(*b, ids, pool), ref);  // and rank 1's own tokens through rank 0's experts

  // Live rebalance: rank 0 takes experts 1, 2, 3 and rank 1 experts 0, 1, 3 (6 slots: 1 and 3
  // have a replica on each rank, rows alternating between them by token).
  std::vector<int32_t> phy2log;
  for (int l = 0; l <= L; ++l)
    for (int32_t e : {2, 3, 1, 0, 1, 3}) phy2log.push_back(e);
  auto next = parallel::placement_from_phy2log(phy2log, L + 1, E, 6, 2);
  ASSERT_TRUE(next.is_ok()) << next.status().message();
  auto s0 = g0.expert_stager()(*next, 0);
  auto s1 = g1.expert_stager()(*next, 1);
  ASSERT_TRUE(s0.is_ok() && s1.is_ok());
  EXPECT_EQ(s0->loaded, 2 * L);                      // 2, 3
  EXPECT_EQ(s0->dropped, 1 * L);                     // 0
  EXPECT_EQ(s1->loaded, 2 * L);                      // 0, 1
  EXPECT_EQ(s1->dropped, 1 * L);                     // 2
  EXPECT_EQ(held(*a, 0), (std::vector<int>{0, 1}));  // staged, not installed
  EXPECT_EQ(logits_of(*a, ids, pool), ref);
  s0->install();
  s1->install();
  g0.set_placement(*next);
  g1.set_placement(*next);
  EXPECT_EQ(held(*a, 0), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(held(*b, 0), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(logits_of(*a, ids, pool), ref);
  EXPECT_EQ(logits_of(*b, ids, pool), ref);
  auto again = g0.expert_stager()(*next, 0);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->loaded, 0);
  EXPECT_EQ(again->dropped, 0);

  // A placement for another expert count does not fit.
  auto wrong = parallel::contiguous_placement(L + 1, 2 * E, 2);
  ASSERT_TRUE(wrong.is_ok());
  EXPECT_FALSE(g0.expert_stager()(*wrong, 0).is_ok());

  ASSERT_TRUE(a->set_expert_parallel(nullptr, {&pool, true}).is_ok());  // every expert again
  EXPECT_EQ(held(*a, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(logits_of(*a, ids, pool), ref);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV4Ep, ::testing::ValuesIn(v4test::kFixtures));

TEST(DeepseekV4Ep, RankCountThatDoesNotDivideTheExpertsIsRefused) {
  auto p = parallel::contiguous_placement(4, 4, 3);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
