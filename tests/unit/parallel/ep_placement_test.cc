// Expert placements for the MPI rank group: contiguous (and its refusal), EPLB's mapped onto
// model layers, and the replica a row picks.
#include <gtest/gtest.h>

#include <algorithm>

#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/eplb.h"

namespace deepinfer::parallel {
namespace {

TEST(EpPlacement, ContiguousSplitsExpertsEvenlyOrRefuses) {
  auto p = contiguous_placement(3, 16, 4);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->slots_per_rank(), 4);
  EXPECT_EQ(p->slot_for(2, 13, 99), 13);  // one replica: the expert's own slot, rank 3
  auto bad = contiguous_placement(3, 16, 3);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("16 routed experts do not divide over 3 ranks"),
            std::string::npos);
}

TEST(EpPlacement, EplbPlacementMapsTracedLayersAndSpreadsReplicasByKey) {
  // One traced layer (model layer 1 of 3), 4 experts, expert 0 hot: 4 redundant slots.
  const std::vector<float> w = {100, 1, 1, 1};
  auto e =
      eplb_rebalance(w, 1, 4, {.num_physical = 8, .num_groups = 1, .num_nodes = 1, .num_gpus = 2});
  ASSERT_TRUE(e.is_ok());
  auto p = placement_from_eplb(*e, {1}, 3, 2);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const int hot = e->logcnt[0];
  EXPECT_GE(hot, 4);
  // Keys 0..hot-1 visit every replica of expert 0 in layer 1, each slot holding expert 0.
  std::vector<int> seen;
  for (int key = 0; key < hot; ++key) {
    const int s = p->slot_for(1, 0, key);
    EXPECT_EQ(p->phy2log[size_t(1) * 8 + s], 0);
    seen.push_back(s);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  // Untraced layers still route every expert to a slot holding it.
  for (int ex = 0; ex < 4; ++ex) EXPECT_EQ(p->phy2log[size_t(0) * 8 + p->slot_for(0, ex, 5)], ex);
}

}  // namespace
}  // namespace deepinfer::parallel
