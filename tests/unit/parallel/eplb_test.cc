// EPLB: the published golden example, and placement invariants over random loads.
#include "deepinfer/parallel/eplb.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer::parallel {
namespace {

TEST(Eplb, GoldenExampleGivesThePublishedPlacement) {
  const std::vector<float> w = {90, 132, 40,  61, 104, 165, 39,  4,   73,  56, 183, 86,
                                20, 107, 104, 64, 19,  197, 187, 157, 172, 86, 16,  27};
  auto r = eplb_rebalance(w, 2, 12,
                          {.num_physical = 16, .num_groups = 4, .num_nodes = 2, .num_gpus = 8});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::vector<int32_t> want = {5, 6,  5, 7, 8, 4,  3, 4, 10, 9, 10, 2, 0, 1, 11, 1,
                                     7, 10, 6, 8, 6, 11, 8, 9, 2,  4, 5,  1, 5, 0, 3,  1};
  EXPECT_EQ(r->phy2log, want);
  EXPECT_EQ(r->max_replicas, 2);
  // log2phy inverts phy2log: expert 5 of layer 0 sits in slots 0 and 2.
  EXPECT_EQ(r->log2phy[5 * 2 + 0], 0);
  EXPECT_EQ(r->log2phy[5 * 2 + 1], 2);
  EXPECT_EQ(r->logcnt[5], 2);
  EXPECT_EQ(r->logcnt[0], 1);
}

TEST(Eplb, BalancedPackingFillsTheLightestPackWithRoom) {
  std::vector<int32_t> pack, rank;
  eplb_balanced_packing({5, 1, 4, 2}, 2, pack, rank);
  // 5 -> pack 0, 4 -> pack 1, 2 -> pack 1 (4 < 5), 1 -> pack 0 (pack 1 full).
  EXPECT_EQ(pack, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(rank, (std::vector<int32_t>{0, 1, 0, 1}));
  // Ties keep index order and go to the lowest pack.
  eplb_balanced_packing({3, 3, 3, 3}, 2, pack, rank);
  EXPECT_EQ(pack, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(Eplb, ReplicationGoesToTheHighestLoadPerReplica) {
  std::vector<int32_t> phy2log, rank, cnt;
  eplb_replicate_experts({10, 30, 20}, 6, phy2log, rank, cnt);
  // 30 -> copy (15 each), 20 -> copy (10), then 30/2=15 > 10 -> third copy of 1.
  EXPECT_EQ(phy2log, (std::vector<int32_t>{0, 1, 2, 1, 2, 1}));
  EXPECT_EQ(rank, (std::vector<int32_t>{0, 0, 0, 1, 1, 2}));
  EXPECT_EQ(cnt, (std::vector<int32_t>{1, 3, 2}));
}

void expect_valid(const EplbPlacement& p, const EplbOptions& o) {
  const int per_gpu = o.num_physical / o.num_gpus;
  for (int l = 0; l < p.num_layers; ++l) {
    std::vector<int> seen(p.num_logical, 0);
    std::vector<int> per_rank(o.num_gpus, 0);
    int total = 0;
    for (int s = 0; s < p.num_physical; ++s) {
      const int e = p.phy2log[size_t(l) * p.num_physical + s];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, p.num_logical);
      seen[e] += 1;
      per_rank[s / per_gpu] += 1;
      EXPECT_EQ(p.log2phy[(size_t(l) * p.num_logical + e) * p.max_replicas +
                          p.phy_rank[size_t(l) * p.num_physical + s]],
                s);
    }
    for (int e = 0; e < p.num_logical; ++e) {
      EXPECT_GE(seen[e], 1) << "expert " << e << " of layer " << l << " has no replica";
      EXPECT_EQ(seen[e], p.logcnt[size_t(l) * p.num_logical + e]);
      total += p.logcnt[size_t(l) * p.num_logical + e];
    }
    EXPECT_EQ(total, o.num_physical);
    for (int g = 0; g < o.num_gpus; ++g) EXPECT_EQ(per_rank[g], per_gpu);
  }
}

TEST(Eplb, RandomLoadsGiveValidPlacementsHierarchicalAndGlobal) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1000);
  struct Case {
    int experts;
    EplbOptions o;
  };
  const Case cases[] = {
      {16, {.num_physical = 24, .num_groups = 4, .num_nodes = 2, .num_gpus = 8}},
      {16, {.num_physical = 16, .num_groups = 4, .num_nodes = 1, .num_gpus = 4}},
      {12, {.num_physical = 18, .num_groups = 3, .num_nodes = 2, .num_gpus = 6}},  // global policy
      {256, {.num_physical = 288, .num_groups = 8, .num_nodes = 4, .num_gpus = 32}},
      {64, {.num_physical = 64, .num_groups = 1, .num_nodes = 1, .num_gpus = 64}},
  };
  for (const Case& c : cases) {
    std::vector<float> w(3 * c.experts);
    for (float& v : w) v = std::floor(u(rng));
    auto r = eplb_rebalance(w, 3, c.experts, c.o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    expect_valid(*r, c.o);
  }
}

TEST(Eplb, BadShapesAreRefusedWithTheReason) {
  const std::vector<float> w(12, 1.0f);
  auto r = eplb_rebalance(w, 1, 12,
                          {.num_physical = 12, .num_groups = 1, .num_nodes = 1, .num_gpus = 5});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("5 ranks do not divide 12 physical experts"),
            std::string::npos);
  EXPECT_FALSE(
      eplb_rebalance(w, 1, 12, {.num_physical = 8, .num_groups = 1, .num_nodes = 1, .num_gpus = 4})
          .is_ok());
  EXPECT_FALSE(
      eplb_rebalance(w, 1, 12, {.num_physical = 12, .num_groups = 5, .num_nodes = 1, .num_gpus = 4})
          .is_ok());
  EXPECT_FALSE(
      eplb_rebalance(w, 2, 12, {.num_physical = 12, .num_groups = 1, .num_nodes = 1, .num_gpus = 4})
          .is_ok());
}

}  // namespace
}  // namespace deepinfer::parallel
