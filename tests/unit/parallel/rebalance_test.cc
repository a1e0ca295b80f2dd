// Live EPLB without MPI: the slot table a rebalance broadcasts, the per-expert load window, rank
// 0's decision and two-phase switch (Rebalancer), and a rank's staging and switch
// (PlacementSwitch) with a fake stager.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "deepinfer/parallel/ep_group.h"
#include "deepinfer/parallel/expert_load_window.h"
#include "deepinfer/parallel/placement_switch.h"
#include "deepinfer/parallel/rebalancer.h"

namespace deepinfer::parallel {
namespace {

TEST(PlacementFromPhy2log, RebuildsReplicasInSlotOrderAndRefusesBadTables) {
  // 1 layer, 4 experts, 6 slots over 2 ranks: expert 2 twice, expert 0 twice.
  auto p = placement_from_phy2log({2, 0, 1, 2, 3, 0}, 1, 4, 6, 2);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->max_replicas, 2);
  EXPECT_EQ(p->logcnt, (std::vector<int32_t>{2, 1, 2, 1}));
  EXPECT_EQ(p->slot_for(0, 2, 0), 0);
  EXPECT_EQ(p->slot_for(0, 2, 1), 3);
  EXPECT_EQ(p->slot_for(0, 0, 7), 5);
  EXPECT_EQ(experts_on_rank(*p, 0, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(experts_on_rank(*p, 0, 1), (std::vector<int>{0, 2, 3}));
  auto missing = placement_from_phy2log({0, 0, 1, 2}, 1, 4, 4, 2);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("expert 3 of layer 0 has no slot"), std::string::npos);
  EXPECT_FALSE(placement_from_phy2log({0, 1, 2, 9}, 1, 4, 4, 2).is_ok());
  EXPECT_FALSE(placement_from_phy2log({0, 1, 2, 3}, 1, 4, 4, 3).is_ok());
  EXPECT_FALSE(placement_from_phy2log({0, 1, 2}, 1, 4, 4, 2).is_ok());
}

TEST(ExpertLoadWindow, SumsTheLastStepsPerExpertAndPerRankLayer) {
  // 2 ranks, 2 layers, 2 experts (index = layer * 2 + expert), a window of 2 busy steps.
  ExpertLoadWindow w(2, 2, 2, 2);
  w.add({{{2, 3}}, {{3, 1}}});  // layer 1: rank 0 computed 3 rows of expert 0, rank 1 1 of expert 1
  w.add({{}, {}});              // idle: not a step
  EXPECT_EQ(w.steps(), 1);
  EXPECT_EQ(w.active_layers(), std::vector<int>{1});
  EXPECT_DOUBLE_EQ(w.layer_imbalance(), 3.0 * 2 / 4);
  w.add({{{2, 1}}, {{3, 3}, {0, 2}}});
  EXPECT_EQ(w.expert_load(), (std::vector<uint64_t>{2, 0, 4, 4}));
  EXPECT_EQ(w.rank_layer_rows(1, 1), 4u);
  // Layer 0: rank 1 alone (2 / 1 = 2); layer 1: 4 and 4 (1).
  EXPECT_DOUBLE_EQ(w.layer_imbalance(), (2.0 + 1.0) / 2);
  w.add({{{2, 5}}, {{3, 5}}});  // the first step leaves the window
  EXPECT_EQ(w.expert_load(), (std::vector<uint64_t>{2, 0, 6, 8}));
  w.clear();
  EXPECT_EQ(w.steps(), 0);
  EXPECT_DOUBLE_EQ(w.layer_imbalance(), 0.0);
}

// Every row on layer 0's expert 0 and 1 (contiguous placement puts both on rank 0).
std::vector<RankRebalanceReport> skewed_step(int64_t staged0 = 0, int64_t staged1 = 0) {
  std::vector<RankRebalanceReport> r(2);
  r[0].rows = {{0, 40}, {1, 30}};
  r[1].rows = {{2, 2}, {3, 1}};
  r[0].staged_epoch = staged0;
  r[1].staged_epoch = staged1;
  return r;
}

TEST(Rebalancer, ProposesAfterTheIntervalThenSwitchesOnlyWhenEveryRankStaged) {
  RebalanceOptions o;
  o.interval_steps = 3;
  o.window_steps = 8;
  auto initial = contiguous_placement(1, 4, 2);
  ASSERT_TRUE(initial.is_ok());
  Rebalancer rb(o, *initial);
  for (int i = 0; i < 2; ++i) {
    rb.observe(skewed_step());
    EXPECT_EQ(rb.next().prepare_epoch, 0);  // not yet: 3 busy steps
  }
  rb.observe({{}, {}});  // idle steps do not count
  EXPECT_EQ(rb.next().prepare_epoch, 0);
  rb.observe(skewed_step());
  RebalanceAction a = rb.next();
  ASSERT_EQ(a.prepare_epoch, 1);
  auto next = placement_from_phy2log(a.phy2log, 1, 4, 4, 2);
  ASSERT_TRUE(next.is_ok());
  // The two hot experts now live on different ranks.
  EXPECT_NE(next->log2phy[0] / 2, next->log2phy[1] / 2);
  EXPECT_EQ(rb.next().prepare_epoch, 0);  // handed out once
  rb.observe(skewed_step(1, 0));          // rank 1 still staging: no switch
  EXPECT_EQ(rb.next().switch_epoch, 0);
  EXPECT_EQ(rb.stats().rebalances, 0);
  rb.observe(skewed_step(1, 1));
  EXPECT_DOUBLE_EQ(rb.window_imbalance(), 2.0 * 70 / 73);
  a = rb.next();
  EXPECT_EQ(a.switch_epoch, 1);
  EXPECT_EQ(a.prepare_epoch, 0);
  const RebalanceStats st = rb.stats();
  EXPECT_EQ(st.rebalances, 1);
  EXPECT_EQ(st.epoch, 1);
  EXPECT_DOUBLE_EQ(st.imbalance_before, 2.0 * 70 / 73);
  EXPECT_EQ(st.window_steps_before, 5);  // 3 busy ones before the proposal, 2 while staging
  EXPECT_LT(st.imbalance_planned, 1.2);
  EXPECT_EQ(rb.window_steps(), 0);  // the window restarts with the new placement
  EXPECT_EQ(rb.placement().phy2log, next->phy2log);
  EXPECT_EQ(rb.next().switch_epoch, 0);
}

TEST(Rebalancer, KeepsAPlacementThatIsAlreadyEvenAndDropsOneARankCannotStage) {
  RebalanceOptions o;
  o.interval_steps = 1;
  auto initial = contiguous_placement(1, 4, 2);
  ASSERT_TRUE(initial.is_ok());
  Rebalancer even(o, *initial);
  std::vector<RankRebalanceReport> r(2);
  r[0].rows = {{0, 10}, {1, 10}};
  r[1].rows = {{2, 10}, {3, 10}};
  even.observe(r);
  EXPECT_EQ(even.next().prepare_epoch, 0);

  Rebalancer rb(o, *initial);
  rb.observe(skewed_step());
  ASSERT_EQ(rb.next().prepare_epoch, 1);
  std::vector<RankRebalanceReport> failed = skewed_step(1, 0);
  failed[1].stage_error = "model.safetensors: read error";
  rb.observe(failed);
  EXPECT_EQ(rb.next().switch_epoch, 0);
  EXPECT_EQ(rb.stats().failed, 1);
  EXPECT_EQ(rb.stats().last_error, "model.safetensors: read error");
  rb.observe(skewed_step());
  EXPECT_EQ(rb.next().prepare_epoch, 2);  // a new proposal, a new epoch
}

TEST(PlacementSwitch, StagesInTheBackgroundAndInstallsWeightsWithThePlacement) {
  std::atomic<bool> release{false};
  std::vector<std::string> events;  // loop thread only (install runs there)
  ExpertStager stager = [&](const EpPlacement& p, int rank) -> Result<StagedExperts> {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    StagedExperts s;
    s.loaded = int(experts_on_rank(p, 0, rank).size());
    s.install = [&events] { events.push_back("weights"); };
    return s;
  };
  EpPlacement installed;
  PlacementSwitch sw(1, stager, [&](EpPlacement p) {
    events.push_back("placement");
    installed = std::move(p);
  });
  auto next = placement_from_phy2log({3, 2, 1, 0}, 1, 4, 4, 2);
  ASSERT_TRUE(next.is_ok());
  sw.prepare(5, *next);
  EXPECT_EQ(sw.staged_epoch(), 0);  // still reading
  EXPECT_TRUE(events.empty());
  release = true;
  for (int i = 0; i < 2000 && sw.staged_epoch() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(sw.staged_epoch(), 5);
  EXPECT_EQ(sw.staged_loaded(), 2);
  EXPECT_TRUE(events.empty());  // nothing in use changes before the switch
  EXPECT_EQ(sw.epoch(), 0);
  sw.switch_to(5);
  EXPECT_EQ(events, (std::vector<std::string>{"weights", "placement"}));
  EXPECT_EQ(installed.phy2log, next->phy2log);
  EXPECT_EQ(sw.epoch(), 5);
  EXPECT_EQ(sw.staged_epoch(), 0);
}

TEST(PlacementSwitch, ReportsAStagingErrorOnceAndRefusesASwitchToAnUnstagedEpoch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // staging ran on a thread
  PlacementSwitch sw(
      0,
      [](const EpPlacement&, int) -> Result<StagedExperts> {
        return corrupt("model.safetensors: truncated");
      },
      [](EpPlacement) {});
  auto next = contiguous_placement(1, 4, 2);
  ASSERT_TRUE(next.is_ok());
  sw.prepare(1, *next);
  std::string err;
  for (int i = 0; i < 2000 && err.empty(); ++i) {
    err = sw.take_error();
    if (err.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(err, "model.safetensors: truncated");
  EXPECT_EQ(sw.take_error(), "");
  EXPECT_EQ(sw.staged_epoch(), 0);
  EXPECT_DEATH(sw.switch_to(1), "switch to placement epoch 1 but this rank staged 0");
}

}  // namespace
}  // namespace deepinfer::parallel
