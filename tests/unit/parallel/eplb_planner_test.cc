// The EPLB planner and the expert trace file: imbalance with and without EPLB on synthetic
// loads, the recorder's windows, and bad files refused with their name.
#include "deepinfer/parallel/eplb_planner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace deepinfer::parallel {
namespace {

ExpertTrace skewed_trace() {
  ExpertTrace t;
  t.model = "synthetic";
  t.num_experts = 8;
  t.num_groups = 2;
  t.layers = {1, 2};
  t.total = {{800, 100, 100, 100, 100, 100, 100, 100}, {50, 50, 50, 50, 50, 50, 50, 650}};
  return t;
}

TEST(EplbPlanner, StaticPlacementMatchesHandComputedImbalance) {
  auto r = plan_eplb(skewed_trace(), {.ep = 4, .redundant = 0, .num_groups = 2, .num_nodes = 1});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  // Layer 1: ranks {900, 200, 200, 200}, mean 375 -> 2.4. Layer 2: {100, 100, 100, 700}, mean 250
  // -> 2.8.
  EXPECT_DOUBLE_EQ(r->static_mean, (900.0 / 375 + 700.0 / 250) / 2);
  EXPECT_DOUBLE_EQ(r->static_worst, 700.0 / 250);
  // Without replicas no arrangement helps: each hot expert's rank holds it plus one more.
  EXPECT_DOUBLE_EQ(r->eplb_mean, r->static_mean);
}

TEST(EplbPlanner, RedundantReplicasBringTheHotExpertDown) {
  auto r = plan_eplb(skewed_trace(), {.ep = 4, .redundant = 8, .num_groups = 2, .num_nodes = 1});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->num_physical, 16);
  EXPECT_LT(r->eplb_worst, 1.2);
  EXPECT_GE(r->eplb_mean, 1.0);
}

TEST(EplbPlanner, EpLargerThanTheExpertsCopiesThemEvenlyWithoutEplb) {
  auto r = plan_eplb(skewed_trace(), {.ep = 16, .redundant = 8, .num_groups = 2, .num_nodes = 1});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_GT(r->static_mean, 1.0);  // 2 copies each: the hot expert's two ranks still stand out
  auto bad = plan_eplb(skewed_trace(), {.ep = 3, .redundant = 0, .num_groups = 2, .num_nodes = 1});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "--ep 3 does not divide 8 physical experts (8 experts + 0 redundant)");
}

TEST(ExpertTrace, RecorderKeepsMoeLayersAndWindowsAndRoundTrips) {
  ExpertTraceRecorder rec("m", 2, 2);
  std::vector<std::vector<uint64_t>> c = {{0, 0}, {1, 2}};
  rec.step(c);
  c = {{0, 0}, {3, 3}};
  rec.step(c);  // window 1: {3, 3}
  c = {{0, 0}, {4, 5}};
  rec.step(c);
  c = {{0, 0}, {10, 5}};
  rec.step(c);  // window 2: {7, 2}
  ExpertTrace t = rec.finish(c);
  EXPECT_EQ(t.layers, (std::vector<int>{1}));
  ASSERT_EQ(t.windows.size(), 2u);
  EXPECT_EQ(t.windows[0][0], (std::vector<uint64_t>{3, 3}));
  EXPECT_EQ(t.windows[1][0], (std::vector<uint64_t>{7, 2}));
  const auto path = std::filesystem::temp_directory_path() / "deepinfer_expert_trace_test.json";
  std::ofstream(path) << expert_trace_to_json(t);
  auto back = read_expert_trace(path.string());
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->total, t.total);
  EXPECT_EQ(back->windows, t.windows);
  EXPECT_EQ(back->num_groups, 2);
  std::filesystem::remove(path);
}

TEST(ExpertTrace, BadFilesAreRefusedByName) {
  EXPECT_EQ(read_expert_trace("/nonexistent/t.json").status().code(), StatusCode::kNotFound);
  const auto path = std::filesystem::temp_directory_path() / "deepinfer_expert_trace_bad.json";
  std::ofstream(path) << "{not json";
  auto r = read_expert_trace(path.string());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos);
  std::ofstream(path)
      << R"({"format":"deepinfer-expert-trace","num_experts":2,"layers":[0],"total":[[1]]})";
  r = read_expert_trace(path.string());
  EXPECT_NE(r.status().message().find("2 expert counts"), std::string::npos)
      << r.status().message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace deepinfer::parallel
