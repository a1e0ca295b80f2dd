// Continuous-batching scheduler without prefill/decode modes: every sequence catches up from
// num_computed_tokens toward all its known tokens under one token budget per step (chunked
// prefill, prefix hits and decode are the same path). Preemption is by recompute.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/kv_cache_manager.h"
#include "deepinfer/engine/schedule_output.h"
#include "deepinfer/engine/sequence.h"

namespace deepinfer::engine {

struct SchedulerConfig {
  int max_num_seqs = 256;               // running sequences at once
  int max_num_batched_tokens = 8192;    // token budget of one step
  int long_prefill_token_threshold = 0; // >0: at most this many tokens per sequence per step
};

Status validate(const SchedulerConfig& config);

class Scheduler {
 public:
  // `kv` must outlive the scheduler; the scheduler is its only user.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a new sequence (its id must be unused). Rejects requests that could never run: an
  // empty prompt, max_tokens < 1, or more tokens than the whole pool holds.
  Status add(Sequence seq);

  // Ends a waiting or running sequence now, freeing its blocks. nullopt for unknown ids.
  std::optional<FinishedSeq> finish(int64_t seq_id, FinishReason reason);
  std::optional<FinishedSeq> abort(int64_t seq_id) { return finish(seq_id, FinishReason::kAbort); }

  // Chooses the next step. It may be called again before the previous step's update() (overlap
  // scheduling, at most one step in flight): the new step then continues after the in-flight
  // tokens, and a token the in-flight step is sampling appears as Sequence::kPendingToken.
  ScheduleOutput schedule();

  // Applies a step (steps are applied in the order they were scheduled): advances computed
  // tokens, caches newly full blocks, appends sampled tokens and finishes sequences on EOS or
  // max_tokens. Entries for sequences finished or preempted since schedule() are skipped.
  std::vector<FinishedSeq> update(const ScheduleOutput& out, const StepOutput& step);

  // Whether update() would apply this entry now (the sequence still runs and has not been
  // preempted since): the engine samples only such entries.
  bool is_current(const ScheduledSeq& entry) const;

  // Speculative decoding: tokens proposed to follow a running sequence's known ones. The next
  // schedule() verifies them (as far as the token budget and max_tokens allow) if the sequence
  // is decoding with no step in flight, and drops them otherwise. Unknown ids are ignored.
  void set_draft(int64_t seq_id, std::vector<int32_t> draft);

  const Sequence* get(int64_t seq_id) const;
  // The same, for the engine's per-step bookkeeping of a sequence's KV export (KvStoreTier).
  Sequence* get_mutable(int64_t seq_id) { return const_cast<Sequence*>(std::as_const(*this).get(seq_id)); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  const std::vector<int64_t>& running() const { return running_; }
  const std::deque<int64_t>& waiting() const { return waiting_; }
  // Waiting sequences whose prefix the lower KV tier was still reading at the last schedule().
  int num_prefetching() const { return num_prefetching_; }
  // Every live sequence, for KvCacheManager::check_invariants.
  std::vector<const Sequence*> live_sequences() const;

 private:
  int chunk_limit(int remaining, int budget) const;
  void preempt(int64_t seq_id);
  static void mark_scheduled(Sequence& seq, const ScheduledSeq& entry);
  static bool applies(const Sequence& seq, const ScheduledSeq& entry);
  FinishedSeq retire(Sequence& seq, FinishReason reason);
  std::vector<int32_t> take_draft(Sequence& seq, int remaining, int budget) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<int64_t> waiting_;   // front is admitted next
  std::vector<int64_t> running_;  // admission order; back is preempted first
  int64_t next_arrival_ = 0;
  int num_prefetching_ = 0;
};

}  // namespace deepinfer::engine
