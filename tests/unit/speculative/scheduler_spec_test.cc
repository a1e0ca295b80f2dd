// Drafts through the scheduler with no model: a decode step carries them, accepted ones become
// output and computed KV, rejected ones are rolled back (never hashed into the prefix cache),
// and max_tokens, EOS and the token budget cap them.
#include <gtest/gtest.h>

#include <vector>

#include "../engine/engine_test_util.h"
#include "deepinfer/engine/batch_builder.h"

namespace deepinfer::engine {
namespace {

using testing::kv_config;
using testing::make_seq;

struct Rig {
  KvCacheManager kv{kv_config(32, 4)};
  Scheduler sched;
  explicit Rig(int budget = 64) : sched(SchedulerConfig{8, budget, 0}, kv) {}
  // Prefills seq 1 (prompt 1..6) and samples `first`.
  void prefill(int max_tokens = 20, int32_t first = 100) {
    ASSERT_TRUE(sched.add(make_seq(1, testing::iota_tokens(6), max_tokens)).is_ok());
    for (bool sampled = false; !sampled;) {  // chunked when the budget is small
      ScheduleOutput out = sched.schedule();
      ASSERT_EQ(out.seqs.size(), 1u);
      StepOutput step;
      sampled = out.seqs[0].samples;
      if (sampled) step.sampled = {first};
      EXPECT_TRUE(sched.update(out, step).empty());
    }
  }
};

TEST(SchedulerDrafts, AcceptedDraftsBecomeOutputRejectedOnesAreRolledBack) {
  Rig r;
  r.prefill();
  const Sequence* seq = r.sched.get(1);
  ASSERT_EQ(seq->num_computed_tokens, 6);
  r.sched.set_draft(1, {101, 102, 103});
  ScheduleOutput out = r.sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 4);  // the last token and three drafts
  EXPECT_TRUE(out.seqs[0].samples);
  EXPECT_EQ(out.seqs[0].draft_tokens, (std::vector<int32_t>{101, 102, 103}));
  // The runner's input: known token then drafts, one logits row each plus the bonus row.
  BatchInputs b = build_forward_batch(out, [&](int64_t id) { return r.sched.get(id); }, 4);
  EXPECT_EQ(b.batch.token_ids, (std::vector<int32_t>{100, 101, 102, 103}));
  EXPECT_EQ(b.batch.logits_rows, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.batch.positions.back(), 9);
  StepOutput step;
  step.sampled = {555};      // the target's token where draft 103 was rejected
  step.accepted = {{101, 102}};
  EXPECT_TRUE(r.sched.update(out, step).empty());
  EXPECT_EQ(seq->output, (std::vector<int32_t>{100, 101, 102, 555}));
  EXPECT_EQ(seq->num_computed_tokens, 9);  // 103's KV (position 9) is not computed
  EXPECT_EQ(seq->num_inflight_tokens, 0);
  // Blocks 0 and 1 (positions 0..7) are full of accepted tokens and cached; block 2 holds
  // rejected 103 at position 9 and is not.
  EXPECT_EQ(seq->num_committed_blocks, 2);
  // The next step recomputes position 9 with the real token.
  out = r.sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].first_position, 9);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 1);
  EXPECT_TRUE(out.seqs[0].draft_tokens.empty());  // drafts last one step only
}

TEST(SchedulerDrafts, CappedByMaxTokensAndBudgetAndEndedByEos) {
  Rig r(3);
  r.prefill(4);  // output has 1 of 4: at most 2 drafts (and the budget of 3 allows 2)
  r.sched.set_draft(1, {7, 8, 9, 10});
  ScheduleOutput out = r.sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].draft_tokens.size(), 2u);
  StepOutput step;
  step.sampled = {11};
  step.accepted = {{7, 8}};
  auto fin = r.sched.update(out, step);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].reason, FinishReason::kLength);
  EXPECT_EQ(fin[0].output, (std::vector<int32_t>{100, 7, 8, 11}));

  Rig e;
  ASSERT_TRUE(e.sched.add([] {
    Sequence s = make_seq(2, testing::iota_tokens(5), 20);
    s.eos_token_ids = {0};
    return s;
  }()).is_ok());
  ScheduleOutput o = e.sched.schedule();
  StepOutput s1;
  s1.sampled = {50};
  (void)e.sched.update(o, s1);
  e.sched.set_draft(2, {0, 51});
  o = e.sched.schedule();
  StepOutput s2;
  s2.sampled = {52};
  s2.accepted = {{0, 51}};  // an EOS among accepted drafts ends the sequence there
  fin = e.sched.update(o, s2);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].reason, FinishReason::kStop);
  EXPECT_EQ(fin[0].output, (std::vector<int32_t>{50, 0}));
}

TEST(SchedulerDrafts, PrefillIgnoresDrafts) {
  KvCacheManager kv(kv_config(32, 4));
  Scheduler sched(SchedulerConfig{8, 64, 0}, kv);
  ASSERT_TRUE(sched.add(make_seq(3, testing::iota_tokens(6), 8)).is_ok());
  sched.set_draft(3, {1, 2});  // waiting, prompt not computed: no drafts
  ScheduleOutput out = sched.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].num_new_tokens, 6);
  EXPECT_TRUE(out.seqs[0].draft_tokens.empty());
}

}  // namespace
}  // namespace deepinfer::engine
