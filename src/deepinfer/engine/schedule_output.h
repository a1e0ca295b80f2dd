// The values that cross the engine's step boundary: what the scheduler decided (ScheduleOutput),
// what the runner sampled (StepOutput) and which sequences ended (FinishedSeq).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

struct ScheduledSeq {
  int64_t seq_id = 0;
  int num_new_tokens = 0;  // tokens whose KV this step computes
  int first_position = 0;  // position of the first of them (= num_computed_tokens before)
  bool samples = false;    // reaches the end of its known tokens, so a token is sampled
  // Speculative decoding: proposed tokens after the sequence's known ones, whose KV this step
  // also computes (the last draft_tokens.size() of num_new_tokens) and which the step verifies.
  std::vector<int32_t> draft_tokens;  // [k] empty = no speculation this step
};

struct ScheduleOutput {
  std::vector<ScheduledSeq> seqs;     // [scheduled seqs] running ones first, then new admissions
  std::vector<int64_t> preempted;     // sequences sent back to waiting this step (blocks freed)
  int total_tokens = 0;               // sum of num_new_tokens
  bool empty() const { return seqs.empty(); }
  int num_sampling() const {
    int n = 0;
    for (const auto& s : seqs) n += s.samples ? 1 : 0;
    return n;
  }
};

struct StepOutput {
  std::vector<int32_t> sampled;  // [ScheduleOutput::num_sampling()] in the order of the
                                 // sampling entries of ScheduleOutput::seqs (= logits rows)
  // Speculative decoding: the verified drafts each entry accepted, which come before its
  // sampled token. Empty, or [sampled.size()] with an empty list where nothing was accepted.
  std::vector<std::vector<int32_t>> accepted;
};

struct FinishedSeq {
  int64_t seq_id = 0;
  int64_t request_key = 0;
  FinishReason reason = FinishReason::kNone;
  std::vector<int32_t> output;
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;  // prompt tokens served by the prefix cache
  int num_replayed_tokens = 0;  // of which computed again by bounded replays (hybrid caches)
};

}  // namespace deepinfer::engine
