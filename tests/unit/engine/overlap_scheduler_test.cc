// Overlap scheduling without a model: the next step is scheduled before the previous one is
// applied (one step in flight), as the engine does. Pending tokens, skipped entries after EOS /
// stop / preemption, and the final outputs (identical to what a sequential run produces) are
// checked, with KV invariants at every step.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <random>

#include "deepinfer/engine/batch_builder.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::fake_token;
using testing::kv_config;
using testing::make_seq;

// What the runner samples for a step that was in flight: the token at the sampled position, for
// entries still current (the engine never samples the others).
StepOutput sample_in_flight(const Scheduler& sched, const ScheduleOutput& out) {
  StepOutput step;
  for (const auto& s : out.seqs) {
    if (!s.samples) continue;
    const Sequence* seq = sched.get(s.seq_id);
    step.sampled.push_back(seq && sched.is_current(s)
                               ? fake_token(s.seq_id, s.first_position + s.num_new_tokens - seq->num_prompt_tokens())
                               : -1);
  }
  return step;
}

TEST(OverlapScheduler, SchedulesAfterInFlightTokensAndStopsAtMaxTokens) {
  KvCacheManager kv(kv_config(8, 4, false));
  Scheduler sched({}, kv);
  ASSERT_TRUE(sched.add(make_seq(1, testing::iota_tokens(5), 3)).is_ok());
  const ScheduleOutput s1 = sched.schedule();
  ASSERT_EQ(s1.seqs.size(), 1u);
  EXPECT_EQ(s1.seqs[0].num_new_tokens, 5);
  EXPECT_TRUE(s1.seqs[0].samples);
  const Sequence* seq = sched.get(1);
  EXPECT_EQ(seq->num_inflight_tokens, 5);
  EXPECT_EQ(seq->num_pending_samples, 1);
  EXPECT_EQ(seq->num_computed_tokens, 0);

  // Step 2 is scheduled while step 1 is in flight: it computes the token step 1 samples.
  const ScheduleOutput s2 = sched.schedule();
  ASSERT_EQ(s2.seqs.size(), 1u);
  EXPECT_EQ(s2.seqs[0].first_position, 5);
  EXPECT_EQ(s2.seqs[0].num_new_tokens, 1);
  BatchInputs in = build_forward_batch(s2, [&](int64_t id) { return sched.get(id); }, 4);
  ASSERT_EQ(in.pending_token_index, std::vector<int32_t>{0});
  EXPECT_EQ(in.pending_seq_id, std::vector<int64_t>{1});
  EXPECT_EQ(in.batch.token_ids[0], Sequence::kPendingToken);

  EXPECT_TRUE(sched.update(s1, sample_in_flight(sched, s1)).empty());
  EXPECT_EQ(seq->output, std::vector<int32_t>{fake_token(1, 0)});
  const ScheduleOutput s3 = sched.schedule();  // the third and last token
  ASSERT_EQ(s3.seqs.size(), 1u);
  EXPECT_TRUE(sched.update(s2, sample_in_flight(sched, s2)).empty());
  // Its last token is in flight: nothing more to schedule.
  EXPECT_TRUE(sched.schedule().empty());
  auto done = sched.update(s3, sample_in_flight(sched, s3));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::kLength);
  EXPECT_EQ(done[0].output, (std::vector<int32_t>{fake_token(1, 0), fake_token(1, 1), fake_token(1, 2)}));
  EXPECT_EQ(kv.num_available_blocks(), kv.num_blocks());
}

TEST(OverlapScheduler, EosWhileTheNextStepIsInFlightDiscardsItsEntry) {
  KvCacheManager kv(kv_config(8, 4, false));
  Scheduler sched({}, kv);
  Sequence s = make_seq(1, testing::iota_tokens(3), 10);
  s.eos_token_ids = {fake_token(1, 0)};
  ASSERT_TRUE(sched.add(s).is_ok());
  const ScheduleOutput s1 = sched.schedule();
  const ScheduleOutput s2 = sched.schedule();
  ASSERT_EQ(s2.seqs.size(), 1u);
  auto done = sched.update(s1, sample_in_flight(sched, s1));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::kStop);
  EXPECT_FALSE(sched.is_current(s2.seqs[0]));
  EXPECT_TRUE(sched.update(s2, sample_in_flight(sched, s2)).empty());
  EXPECT_EQ(kv.num_available_blocks(), kv.num_blocks());
  EXPECT_FALSE(sched.has_unfinished());
}

// Random traffic with one step always in flight; outputs must be exactly the fake runner's.
void simulate_overlapped(uint32_t seed, bool prefix_caching, int threshold) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int block_size = 4;
  KvCacheManager kv(kv_config(24, block_size, prefix_caching));
  Scheduler sched(testing::simulation_config(threshold), kv);
  std::map<int64_t, Sequence> submitted;
  std::map<int64_t, FinishedSeq> finished;
  int64_t next_id = 1;
  int preemptions = 0, discarded = 0;
  std::optional<ScheduleOutput> in_flight;
  auto record = [&](FinishedSeq f) {
    ASSERT_EQ(finished.count(f.seq_id), 0u) << "seq " << f.seq_id << " finished twice";
    finished[f.seq_id] = std::move(f);
  };

  for (int step = 0; step < 4000 && (step < 800 || sched.has_unfinished() || in_flight); ++step) {
    if (step < 600 && uniform(0, 9) < 3) {
      Sequence s = make_seq(next_id++, {}, uniform(1, 16));
      for (int i = uniform(1, 20); i > 0; --i) s.prompt.push_back(uniform(1, 8));  // shared prefixes
      if (uniform(0, 3) == 0) s.eos_token_ids = {fake_token(s.id, uniform(0, 20))};
      submitted[s.id] = s;
      ASSERT_TRUE(sched.add(s).is_ok());
    }
    // Schedule the next step while `in_flight` computes.
    ScheduleOutput next = sched.schedule();
    preemptions += static_cast<int>(next.preempted.size());
    kv.check_invariants(sched.live_sequences());
    if (!next.empty()) {
      BatchInputs in = build_forward_batch(next, [&](int64_t id) { return sched.get(id); }, block_size);
      for (int64_t id : in.pending_seq_id) {
        ASSERT_TRUE(in_flight.has_value()) << "pending token with nothing in flight";
        bool samples = false;
        for (const auto& e : in_flight->seqs) samples |= e.seq_id == id && e.samples;
        ASSERT_TRUE(samples) << "seq " << id << " waits for a sample no step is drawing";
      }
    }
    if (in_flight) {
      StepOutput result = sample_in_flight(sched, *in_flight);
      for (int32_t t : result.sampled) discarded += t < 0 ? 1 : 0;
      if (uniform(0, 49) == 0 && !in_flight->seqs.empty()) {  // stop string or abort meanwhile
        auto f = sched.finish(in_flight->seqs[0].seq_id, FinishReason::kStop);
        if (f) record(std::move(*f));
      }
      for (auto& f : sched.update(*in_flight, result)) record(std::move(f));
      kv.check_invariants(sched.live_sequences());
    } else if (sched.num_running() > 0) {
      ASSERT_FALSE(next.empty()) << "stalled";
    }
    in_flight.reset();
    if (!next.empty()) in_flight = std::move(next);
  }
  ASSERT_FALSE(sched.has_unfinished());
  EXPECT_EQ(kv.num_available_blocks(), kv.num_blocks());
  testing::expect_fake_outputs(finished, submitted);
  std::printf("seed %u: %zu requests, %d preemptions, %d in-flight samples discarded\n", seed,
              submitted.size(), preemptions, discarded);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(discarded, 0);
}

TEST(OverlapScheduler, RandomTrafficWithPrefixCache) { simulate_overlapped(11, true, 0); }
TEST(OverlapScheduler, RandomTrafficChunkedNoPrefixCache) { simulate_overlapped(12, false, 6); }

}  // namespace
}  // namespace deepinfer::engine
