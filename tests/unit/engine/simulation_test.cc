// Randomized scheduler + KV manager simulation on a tiny pool: random arrivals with shared
// prefixes, random lengths, EOS, aborts and stop-string finishes. Invariants are checked every
// step, and every request must finish with exactly the tokens the fake runner would produce.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "deepinfer/engine/batch_builder.h"
#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::fake_step;
using testing::fake_token;
using testing::kv_config;

void simulate(uint32_t seed, bool prefix_caching, int threshold) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int block_size = 4;
  KvCacheManager kv(kv_config(24, block_size, prefix_caching));
  const SchedulerConfig sc = testing::simulation_config(threshold);
  Scheduler sched(sc, kv);

  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 3; ++p) {
    std::vector<int32_t> v(uniform(0, 16));
    for (auto& t : v) t = uniform(1, 50);
    prefixes.push_back(v);
  }
  std::map<int64_t, Sequence> submitted;
  std::map<int64_t, FinishedSeq> finished;
  int64_t next_id = 1;
  int total_preemptions = 0, cached_tokens = 0;

  auto record = [&](FinishedSeq f) {
    ASSERT_EQ(finished.count(f.seq_id), 0u) << "seq " << f.seq_id << " finished twice";
    cached_tokens += f.num_cached_tokens;
    finished[f.seq_id] = std::move(f);
  };

  for (int step = 0; step < 3000 && (step < 1000 || sched.has_unfinished()); ++step) {
    if (step < 800 && uniform(0, 9) < 3) {
      Sequence s;
      s.id = next_id++;
      s.prompt = prefixes[uniform(0, 2)];
      int extra = uniform(s.prompt.empty() ? 1 : 0, 24);
      for (int i = 0; i < extra; ++i) s.prompt.push_back(uniform(1, 50));
      s.max_tokens = uniform(1, 20);
      if (uniform(0, 3) == 0) s.eos_token_ids = {fake_token(s.id, uniform(0, 25))};
      submitted[s.id] = s;
      ASSERT_TRUE(sched.add(s).is_ok());
    }
    ScheduleOutput out = sched.schedule();
    kv.check_invariants(sched.live_sequences());
    ASSERT_LE(out.total_tokens, sc.max_num_batched_tokens);
    ASSERT_LE(sched.num_running(), sc.max_num_seqs);
    total_preemptions += static_cast<int>(out.preempted.size());
    if (sched.has_unfinished() && sched.num_running() > 0) {
      ASSERT_FALSE(out.empty()) << "stalled";
    }
    if (!out.empty()) {
      BatchInputs in = build_forward_batch(out, [&](int64_t id) { return sched.get(id); }, block_size);
      ASSERT_EQ(in.batch.num_tokens(), out.total_tokens);
      ASSERT_EQ(static_cast<int>(in.batch.logits_rows.size()), out.num_sampling());
      for (int32_t slot : in.slot_mapping) {
        ASSERT_LT(slot, kv.num_blocks() * block_size);
      }
    }
    StepOutput result = fake_step(sched, out);
    // Sometimes the engine ends a sequence between schedule and update (abort, stop string).
    if (uniform(0, 49) == 0 && !out.seqs.empty()) {
      int64_t id = out.seqs[uniform(0, static_cast<int>(out.seqs.size()) - 1)].seq_id;
      auto f = sched.finish(id, uniform(0, 1) ? FinishReason::kAbort : FinishReason::kStop);
      ASSERT_TRUE(f.has_value());
      record(std::move(*f));
    }
    for (auto& f : sched.update(out, result)) record(std::move(f));
    kv.check_invariants(sched.live_sequences());
    if (uniform(0, 99) == 0 && sched.num_waiting() > 0) {
      auto f = sched.abort(sched.waiting().back());
      ASSERT_TRUE(f.has_value());
      record(std::move(*f));
    }
  }

  ASSERT_FALSE(sched.has_unfinished());
  EXPECT_EQ(kv.num_available_blocks(), kv.num_blocks());
  testing::expect_fake_outputs(finished, submitted);
  for (const auto& [id, f] : finished) {
    const Sequence& s = submitted.at(id);
    if (f.reason == FinishReason::kStop && !s.eos_token_ids.empty() &&
        f.output.back() == s.eos_token_ids[0]) {
      EXPECT_LE(static_cast<int>(f.output.size()), s.max_tokens);
    }
  }
  std::printf("seed %u: %zu requests, %d preemptions, %d cached prompt tokens\n", seed,
              submitted.size(), total_preemptions, cached_tokens);
  EXPECT_GT(submitted.size(), 150u);
  // The tiny pool must actually exercise preemption, and shared prefixes the cache.
  EXPECT_GT(total_preemptions, 0);
  if (prefix_caching) {
    EXPECT_GT(cached_tokens, 0);
  }
}

TEST(Simulation, RandomTrafficWithPrefixCache) { simulate(1234, true, 0); }
TEST(Simulation, RandomTrafficChunkedNoPrefixCache) { simulate(99, false, 6); }
TEST(Simulation, RandomTrafficChunkedWithPrefixCache) { simulate(7, true, 5); }

}  // namespace
}  // namespace deepinfer::engine
