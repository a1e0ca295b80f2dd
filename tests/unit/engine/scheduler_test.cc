// Scheduler with a fake runner: chunked prefill, budgets, max_num_seqs, prefix hits,
// preemption by recompute, EOS / length / abort / engine-side finish.
#include "deepinfer/engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::fake_step;
using testing::fake_token;
using testing::iota_tokens;
using testing::kv_config;
using testing::make_seq;

struct Harness {
  Harness(KvCacheConfig kc, SchedulerConfig sc) : kv(kc), sched(sc, kv) {}
  // One schedule -> fake run -> update; checks invariants around it.
  ScheduleOutput step() {
    ScheduleOutput out = sched.schedule();
    kv.check_invariants(sched.live_sequences());
    for (auto& f : sched.update(out, fake_step(sched, out))) finished[f.seq_id] = f;
    kv.check_invariants(sched.live_sequences());
    return out;
  }
  void run_to_end(int max_steps = 1000) {
    for (int i = 0; i < max_steps && sched.has_unfinished(); ++i) step();
    ASSERT_FALSE(sched.has_unfinished());
    EXPECT_EQ(kv.num_available_blocks(), kv.num_blocks());
  }
  KvCacheManager kv;
  Scheduler sched;
  std::map<int64_t, FinishedSeq> finished;
};

SchedulerConfig sched_config(int max_seqs, int budget, int threshold = 0) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.long_prefill_token_threshold = threshold;
  return c;
}

std::vector<int32_t> expected_output(int64_t id, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(fake_token(id, i));
  return v;
}

TEST(Scheduler, RejectsRequestsThatCanNeverRun) {
  Harness h(kv_config(4, 4), sched_config(4, 64));
  EXPECT_FALSE(h.sched.add(make_seq(1, {})).is_ok());
  EXPECT_FALSE(h.sched.add(make_seq(2, iota_tokens(4), 0)).is_ok());
  EXPECT_FALSE(h.sched.add(make_seq(3, iota_tokens(14), 3)).is_ok());  // 17 > 16 tokens
  EXPECT_TRUE(h.sched.add(make_seq(4, iota_tokens(14), 2)).is_ok());
  EXPECT_FALSE(h.sched.add(make_seq(4, iota_tokens(2), 2)).is_ok());   // id in use
  EXPECT_FALSE(validate(sched_config(0, 8)).is_ok());
  EXPECT_FALSE(validate(sched_config(1, 0)).is_ok());
  h.run_to_end();
}

TEST(Scheduler, ChunkedPrefillAcrossSteps) {
  Harness h(kv_config(16, 4), sched_config(4, 8));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(20), 2)).is_ok());
  auto s1 = h.step();
  ASSERT_EQ(s1.seqs.size(), 1u);
  EXPECT_EQ(s1.seqs[0].num_new_tokens, 8);
  EXPECT_EQ(s1.seqs[0].first_position, 0);
  EXPECT_FALSE(s1.seqs[0].samples);
  auto s2 = h.step();
  EXPECT_EQ(s2.seqs[0].first_position, 8);
  EXPECT_FALSE(s2.seqs[0].samples);
  auto s3 = h.step();
  EXPECT_EQ(s3.seqs[0].first_position, 16);
  EXPECT_EQ(s3.seqs[0].num_new_tokens, 4);
  EXPECT_TRUE(s3.seqs[0].samples);
  auto s4 = h.step();  // decode: one token
  EXPECT_EQ(s4.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(s4.seqs[0].first_position, 20);
  ASSERT_EQ(h.finished.count(1), 1u);
  EXPECT_EQ(h.finished[1].reason, FinishReason::kLength);
  EXPECT_EQ(h.finished[1].output, expected_output(1, 2));
  EXPECT_EQ(h.kv.num_available_blocks(), 16);
}

TEST(Scheduler, RunningFirstThenAdmissionsShareTheBudget) {
  Harness h(kv_config(16, 4), sched_config(4, 10, /*threshold=*/0));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(6), 3)).is_ok());
  auto s1 = h.step();
  ASSERT_TRUE(h.sched.add(make_seq(2, iota_tokens(12, 50), 3)).is_ok());
  auto s2 = h.step();
  ASSERT_EQ(s2.seqs.size(), 2u);
  EXPECT_EQ(s2.seqs[0].seq_id, 1);
  EXPECT_EQ(s2.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(s2.seqs[1].seq_id, 2);
  EXPECT_EQ(s2.seqs[1].num_new_tokens, 9);  // the rest of the budget
  EXPECT_EQ(s2.total_tokens, 10);
  h.run_to_end();
  EXPECT_EQ(h.finished[2].output, expected_output(2, 3));
}

TEST(Scheduler, LongPrefillThresholdCapsChunks) {
  Harness h(kv_config(16, 4), sched_config(4, 64, /*threshold=*/5));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(12), 1)).is_ok());
  ASSERT_TRUE(h.sched.add(make_seq(2, iota_tokens(3, 90), 1)).is_ok());
  auto s1 = h.step();
  ASSERT_EQ(s1.seqs.size(), 2u);
  EXPECT_EQ(s1.seqs[0].num_new_tokens, 5);
  EXPECT_EQ(s1.seqs[1].num_new_tokens, 3);
  EXPECT_TRUE(s1.seqs[1].samples);
  h.run_to_end();
  EXPECT_EQ(h.finished.size(), 2u);
}

TEST(Scheduler, MaxNumSeqsLimitsRunning) {
  Harness h(kv_config(32, 4), sched_config(2, 64));
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(h.sched.add(make_seq(i, iota_tokens(4, i * 100), 2)).is_ok());
  auto s1 = h.step();
  EXPECT_EQ(s1.seqs.size(), 2u);
  EXPECT_EQ(h.sched.num_running(), 2);
  EXPECT_EQ(h.sched.num_waiting(), 1);
  h.step();  // 1 and 2 finish (max_tokens 2)
  EXPECT_EQ(h.finished.size(), 2u);
  auto s3 = h.step();
  ASSERT_EQ(s3.seqs.size(), 1u);
  EXPECT_EQ(s3.seqs[0].seq_id, 3);
  h.run_to_end();
}

TEST(Scheduler, PrefixHitIsReportedAsCachedTokens) {
  Harness h(kv_config(16, 4), sched_config(4, 64));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(10), 2)).is_ok());
  h.run_to_end();
  EXPECT_EQ(h.finished[1].num_cached_tokens, 0);
  ASSERT_TRUE(h.sched.add(make_seq(2, iota_tokens(10), 2)).is_ok());
  auto s = h.step();
  ASSERT_EQ(s.seqs.size(), 1u);
  EXPECT_EQ(s.seqs[0].first_position, 8);
  EXPECT_EQ(s.seqs[0].num_new_tokens, 2);
  EXPECT_TRUE(s.seqs[0].samples);
  h.run_to_end();
  EXPECT_EQ(h.finished[2].num_cached_tokens, 8);
  EXPECT_EQ(h.finished[2].num_prompt_tokens, 10);
}

// Two sequences outgrow a 6-block pool; the later one is preempted, recomputed and still
// produces exactly what it would have without preemption.
void preemption_case(bool prefix_caching) {
  Harness h(kv_config(6, 4, prefix_caching), sched_config(4, 64));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(8), 8)).is_ok());
  ASSERT_TRUE(h.sched.add(make_seq(2, iota_tokens(8, 40), 8)).is_ok());
  std::vector<int64_t> preempted;
  for (int i = 0; i < 100 && h.sched.has_unfinished(); ++i) {
    auto out = h.step();
    preempted.insert(preempted.end(), out.preempted.begin(), out.preempted.end());
  }
  ASSERT_FALSE(h.sched.has_unfinished());
  ASSERT_FALSE(preempted.empty());
  EXPECT_EQ(preempted[0], 2);  // the most recently admitted goes first
  for (int64_t id : {1, 2}) {
    EXPECT_EQ(h.finished[id].reason, FinishReason::kLength);
    EXPECT_EQ(h.finished[id].output, expected_output(id, 8));
  }
  EXPECT_EQ(h.kv.num_available_blocks(), 6);
}

TEST(Scheduler, PreemptionByRecomputeWithPrefixCache) { preemption_case(true); }
TEST(Scheduler, PreemptionByRecomputeWithoutPrefixCache) { preemption_case(false); }

TEST(Scheduler, EosStopsAndIgnoreEosDoesNot) {
  Harness h(kv_config(16, 4), sched_config(4, 64));
  Sequence a = make_seq(1, iota_tokens(5), 10);
  a.eos_token_ids = {fake_token(1, 2)};
  Sequence b = make_seq(2, iota_tokens(5), 4);
  b.eos_token_ids = {fake_token(2, 1)};
  b.ignore_eos = true;
  ASSERT_TRUE(h.sched.add(a).is_ok());
  ASSERT_TRUE(h.sched.add(b).is_ok());
  h.run_to_end();
  EXPECT_EQ(h.finished[1].reason, FinishReason::kStop);
  EXPECT_EQ(h.finished[1].output, expected_output(1, 3));
  EXPECT_EQ(h.finished[2].reason, FinishReason::kLength);
  EXPECT_EQ(h.finished[2].output.size(), 4u);
}

TEST(Scheduler, AbortWaitingAndRunningFreesBlocks) {
  Harness h(kv_config(16, 4), sched_config(1, 64));
  ASSERT_TRUE(h.sched.add(make_seq(1, iota_tokens(9), 50)).is_ok());
  ASSERT_TRUE(h.sched.add(make_seq(2, iota_tokens(9, 30), 50)).is_ok());
  h.step();
  EXPECT_EQ(h.sched.num_running(), 1);
  EXPECT_LT(h.kv.num_available_blocks(), 16);
  auto w = h.sched.abort(2);  // waiting
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->reason, FinishReason::kAbort);
  EXPECT_EQ(h.sched.num_waiting(), 0);
  // Abort a running one between schedule() and update(): update skips it.
  auto out = h.sched.schedule();
  StepOutput step = fake_step(h.sched, out);
  auto r = h.sched.abort(1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->output.size(), 1u);
  EXPECT_TRUE(h.sched.update(out, step).empty());
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_FALSE(h.sched.abort(1).has_value());
  EXPECT_EQ(h.kv.num_available_blocks(), 16);
  h.kv.check_invariants(h.sched.live_sequences());
}

TEST(Scheduler, EngineCanFinishForStopStrings) {
  Harness h(kv_config(16, 4), sched_config(4, 64));
  ASSERT_TRUE(h.sched.add(make_seq(7, iota_tokens(3), 40)).is_ok());
  h.step();
  h.step();
  auto f = h.sched.finish(7, FinishReason::kStop);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->reason, FinishReason::kStop);
  EXPECT_EQ(f->request_key, 70);
  EXPECT_EQ(f->output, expected_output(7, 2));
  EXPECT_EQ(h.kv.num_available_blocks(), 16);
}

}  // namespace
}  // namespace deepinfer::engine
