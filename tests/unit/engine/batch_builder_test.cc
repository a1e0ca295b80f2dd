// build_forward_batch: flattened tokens and positions, CSR block tables, logits rows and
// KV slots, for a step mixing a decode, a prefix hit and a prefill chunk.
#include "deepinfer/engine/batch_builder.h"

#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace deepinfer::engine {
namespace {
using testing::fake_step;
using testing::iota_tokens;
using testing::kv_config;
using testing::make_seq;

TEST(BatchBuilder, FillsForwardBatchAndSlots) {
  KvCacheManager kv(kv_config(16, 4));
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 9;
  Scheduler sched(sc, kv);
  auto lookup = [&](int64_t id) { return sched.get(id); };

  ASSERT_TRUE(sched.add(make_seq(1, iota_tokens(6), 5)).is_ok());
  auto out1 = sched.schedule();
  BatchInputs in1 = build_forward_batch(out1, lookup, 4);
  EXPECT_EQ(in1.batch.token_ids, iota_tokens(6));
  EXPECT_EQ(in1.batch.logits_rows, (std::vector<int32_t>{5}));
  sched.update(out1, fake_step(sched, out1));

  ASSERT_TRUE(sched.add(make_seq(2, iota_tokens(6), 5)).is_ok());        // hits seq 1's block
  ASSERT_TRUE(sched.add(make_seq(3, iota_tokens(10, 100), 5)).is_ok());  // gets a chunk
  auto out = sched.schedule();
  ASSERT_EQ(out.seqs.size(), 3u);
  BatchInputs in = build_forward_batch(out, lookup, 4);
  const ForwardBatch& b = in.batch;
  const Sequence* s1 = sched.get(1);
  const Sequence* s2 = sched.get(2);
  const Sequence* s3 = sched.get(3);

  // seq 1 decodes its sampled token at position 6; seq 2 computes tokens 4..5 (block 0 cached);
  // seq 3 gets the remaining 9 - 1 - 2 = 6 tokens of its prompt.
  EXPECT_EQ(b.num_tokens(), 9);
  EXPECT_EQ(b.num_seqs(), 3);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{s1->output[0], 5, 6, 100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{6, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(b.seq_token_start, (std::vector<int32_t>{0, 1, 3, 9}));
  EXPECT_EQ(b.seq_context_len, (std::vector<int32_t>{7, 6, 6}));
  EXPECT_EQ(b.block_table_indptr, (std::vector<int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(b.block_table[0], s1->block_table[0]);
  EXPECT_EQ(b.block_table[2], s1->block_table[0]);  // shared prefix block
  EXPECT_EQ(b.block_table[3], s2->block_table[1]);
  EXPECT_EQ(b.block_table[4], s3->block_table[0]);
  EXPECT_EQ(b.logits_rows, (std::vector<int32_t>{0, 2}));  // seq 3 is mid-prefill
  ASSERT_EQ(in.slot_mapping.size(), 9u);
  EXPECT_EQ(in.slot_mapping[0], s1->block_table[1] * 4 + 2);
  EXPECT_EQ(in.slot_mapping[1], s2->block_table[1] * 4 + 0);
  EXPECT_EQ(in.slot_mapping[8], s3->block_table[1] * 4 + 1);
  // Every slot written this step is distinct.
  std::vector<int32_t> slots = in.slot_mapping;
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end());

  sched.update(out, fake_step(sched, out));
  for (int64_t id : {1, 2, 3}) sched.abort(id);
  kv.check_invariants(sched.live_sequences());
  EXPECT_EQ(kv.num_available_blocks(), 16);
}

// A model that reads token ids before the step (KvCacheSpec::token_history, DeepSeek-V4.1's
// Engram) gets each sequence's last k ids before its first new token, -1 before position 0.
TEST(BatchBuilder, CarriesEachSequencesTokenHistory) {
  KvCacheManager kv(kv_config(16, 4));
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 4;
  Scheduler sched(sc, kv);
  auto lookup = [&](int64_t id) { return sched.get(id); };
  ASSERT_TRUE(sched.add(make_seq(1, iota_tokens(6, 10), 5)).is_ok());
  auto out1 = sched.schedule();  // tokens 0..3
  BatchInputs in1 = build_forward_batch(make_runner_input(out1, lookup, 4, {}, 3), 4);
  EXPECT_EQ(in1.batch.seq_token_history, (std::vector<int32_t>{-1, -1, -1}));
  sched.update(out1, fake_step(sched, out1));
  auto out2 = sched.schedule();  // tokens 4..5
  BatchInputs in2 = build_forward_batch(make_runner_input(out2, lookup, 4, {}, 3), 4);
  EXPECT_EQ(in2.batch.positions, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(in2.batch.seq_token_history, (std::vector<int32_t>{11, 12, 13}));
  // Without a history (every other model) the field stays empty.
  EXPECT_TRUE(build_forward_batch(out2, lookup, 4).batch.seq_token_history.empty());
  sched.update(out2, fake_step(sched, out2));
  sched.abort(1);
}

}  // namespace
}  // namespace deepinfer::engine
