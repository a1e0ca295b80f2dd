// Shared helpers for the model-free engine tests: synthetic sequences and a fake runner whose
// "sampled" token depends only on (sequence id, output length), so reruns are comparable.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/engine/scheduler.h"
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine::testing {

inline std::vector<int32_t> iota_tokens(int n, int32_t start = 1) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

inline Sequence make_seq(int64_t id, std::vector<int32_t> prompt, int max_tokens = 4) {
  Sequence s;
  s.id = id;
  s.request_key = id * 10;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  return s;
}

inline int32_t fake_token(int64_t seq_id, size_t output_len) {
  return static_cast<int32_t>(5000 + (seq_id * 31 + static_cast<int64_t>(output_len) * 7) % 97);
}

// What a runner would sample for this schedule.
inline StepOutput fake_step(const Scheduler& sched, const ScheduleOutput& out) {
  StepOutput step;
  for (const auto& s : out.seqs) {
    if (!s.samples) continue;
    const Sequence* seq = sched.get(s.seq_id);
    step.sampled.push_back(seq ? fake_token(seq->id, seq->output.size()) : 0);
  }
  return step;
}

inline KvCacheConfig kv_config(int num_blocks, int block_size, bool prefix = true) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.enable_prefix_caching = prefix;
  c.cache_namespace = "test-model";
  return c;
}

// Limits of the random-traffic simulations: with kv_config(24, 4) they must preempt.
inline SchedulerConfig simulation_config(int long_prefill_threshold) {
  SchedulerConfig sc;
  sc.max_num_seqs = 6;
  sc.max_num_batched_tokens = 32;
  sc.long_prefill_token_threshold = long_prefill_threshold;
  return sc;
}

// Every finished sequence produced exactly the fake runner's tokens, and one cut by length has
// all max_tokens of them.
inline void expect_fake_outputs(const std::map<int64_t, FinishedSeq>& finished,
                                const std::map<int64_t, Sequence>& submitted) {
  EXPECT_EQ(finished.size(), submitted.size());
  for (const auto& [id, f] : finished) {
    for (size_t i = 0; i < f.output.size(); ++i) {
      ASSERT_EQ(f.output[i], fake_token(id, i)) << "seq " << id << " token " << i;
    }
    if (f.reason == FinishReason::kLength) {
      EXPECT_EQ(static_cast<int>(f.output.size()), submitted.at(id).max_tokens) << "seq " << id;
    }
  }
}

}  // namespace deepinfer::engine::testing
