// One step of scheduling, vLLM v1 style: running sequences first in admission order (taking
// blocks from the most recently admitted when the pool runs dry), then waiting ones in FIFO
// order with a prefix-cache lookup, until the token budget or max_num_seqs is reached.
#include "deepinfer/engine/scheduler.h"

#include <algorithm>
#include <climits>

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

Status validate(const SchedulerConfig& config) {
  if (config.max_num_seqs <= 0)
    return invalid_argument("scheduler max_num_seqs {} must be positive", config.max_num_seqs);
  if (config.max_num_batched_tokens <= 0)
    return invalid_argument("scheduler max_num_batched_tokens {} must be positive",
                            config.max_num_batched_tokens);
  if (config.long_prefill_token_threshold < 0)
    return invalid_argument("scheduler long_prefill_token_threshold {} must be >= 0",
                            config.long_prefill_token_threshold);
  return Status::ok();
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  DI_CHECK(validate(config).is_ok(), "{}", validate(config).message());
}

Status Scheduler::add(Sequence seq) {
  if (seqs_.count(seq.id) != 0) return invalid_argument("sequence id {} is already in use", seq.id);
  if (seq.prompt.empty()) return invalid_argument("sequence {}: the prompt is empty", seq.id);
  if (seq.max_tokens < 1)
    return invalid_argument("sequence {}: max_tokens {} must be at least 1", seq.id, seq.max_tokens);
  const int64_t capacity = static_cast<int64_t>(kv_.num_blocks()) * kv_.block_size();
  const int64_t needed = static_cast<int64_t>(seq.prompt.size()) + seq.max_tokens;
  if (needed > capacity)
    return invalid_argument("sequence {}: prompt ({}) + max_tokens ({}) exceeds the KV cache ({} tokens)",
                            seq.id, seq.prompt.size(), seq.max_tokens, capacity);
  seq.output.clear();
  seq.status = SeqStatus::kWaiting;
  seq.finish_reason = FinishReason::kNone;
  seq.arrival = next_arrival_++;
  seq.num_computed_tokens = 0;
  seq.num_inflight_tokens = 0;
  seq.num_pending_samples = 0;
  seq.num_cached_tokens = -1;
  seq.block_table.clear();
  seq.num_committed_blocks = 0;
  seq.block_hashes.clear();
  seq.tier_keys.clear();
  seq.tier_prefetch = TierPrefetch::kNotStarted;
  seq.skip_tier = false;
  const int64_t id = seq.id;
  seqs_.emplace(id, std::make_unique<Sequence>(std::move(seq)));
  waiting_.push_back(id);
  return Status::ok();
}

void Scheduler::mark_scheduled(Sequence& seq, const ScheduledSeq& entry) {
  seq.num_inflight_tokens += entry.num_new_tokens;
  if (entry.samples) ++seq.num_pending_samples;
}

bool Scheduler::applies(const Sequence& seq, const ScheduledSeq& entry) {
  return seq.status == SeqStatus::kRunning && seq.num_computed_tokens == entry.first_position &&
         entry.num_new_tokens <= seq.num_inflight_tokens &&
         (!entry.samples || seq.num_pending_samples > 0);
}

bool Scheduler::is_current(const ScheduledSeq& entry) const {
  const Sequence* seq = get(entry.seq_id);
  return seq != nullptr && applies(*seq, entry);
}

void Scheduler::set_draft(int64_t seq_id, std::vector<int32_t> draft) {
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end()) it->second->draft = std::move(draft);
}

std::vector<int32_t> Scheduler::take_draft(Sequence& seq, int remaining, int budget) const {
  std::vector<int32_t> draft = std::move(seq.draft);
  seq.draft.clear();
  // Only a decode step (one known token left, nothing in flight) carries drafts; every draft
  // accepted is one more output token, so max_tokens caps them too.
  const int room = std::min(budget - 1, seq.max_tokens - static_cast<int>(seq.output.size()) - 1);
  if (remaining != 1 || seq.num_inflight_tokens != 0 || room <= 0) return {};
  if (static_cast<int>(draft.size()) > room) draft.resize(static_cast<size_t>(room));
  return draft;
}

const Sequence* Scheduler::get(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

std::vector<const Sequence*> Scheduler::live_sequences() const {
  std::vector<const Sequence*> out;
  out.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) out.push_back(s.get());
  return out;
}

int Scheduler::chunk_limit(int remaining, int budget) const {
  int cap = config_.long_prefill_token_threshold > 0 ? config_.long_prefill_token_threshold : INT_MAX;
  return std::min({remaining, budget, cap});
}

void Scheduler::preempt(int64_t seq_id) {
  Sequence& seq = *seqs_.at(seq_id);
  kv_.free(seq);  // recompute later: generated tokens stay, their KV does not
  // A step in flight for it is void (update skips it): its sample is drawn again on recompute.
  seq.num_inflight_tokens = 0;
  seq.num_pending_samples = 0;
  seq.status = SeqStatus::kPreempted;
  ++seq.num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), seq_id));
  waiting_.push_front(seq_id);
}

FinishedSeq Scheduler::retire(Sequence& seq, FinishReason reason) {
  seq.finish_reason = reason;  // before free: the tier hook tells a finish from a preemption
  kv_.free(seq);
  if (seq.status == SeqStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq.id));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq.id));
  }
  seq.status = SeqStatus::kFinished;
  seq.finish_reason = reason;
  FinishedSeq out;
  out.seq_id = seq.id;
  out.request_key = seq.request_key;
  out.reason = reason;
  out.output = std::move(seq.output);
  out.num_prompt_tokens = seq.num_prompt_tokens();
  out.num_cached_tokens = std::max(0, seq.num_cached_tokens);
  out.num_replayed_tokens = seq.num_replayed_tokens;
  seqs_.erase(seq.id);  // destroys seq
  return out;
}

std::optional<FinishedSeq> Scheduler::finish(int64_t seq_id, FinishReason reason) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return std::nullopt;
  return retire(*it->second, reason);
}

ScheduleOutput Scheduler::schedule() {
  ScheduleOutput out;
  int budget = config_.max_num_batched_tokens;

  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Sequence& seq = *seqs_.at(running_[i]);
    if (static_cast<int>(seq.output.size()) + seq.num_pending_samples >= seq.max_tokens) {
      ++i;  // its last token is being sampled by a step in flight: nothing more to run
      continue;
    }
    const int start = seq.num_scheduled_tokens();
    const int remaining = seq.num_tokens() - start;
    DI_CHECK(remaining > 0, "running seq {} has nothing to compute", seq.id);
    std::vector<int32_t> draft = take_draft(seq, remaining, budget);
    const int n = chunk_limit(remaining, budget) + static_cast<int>(draft.size());
    bool allocated = false;
    while (true) {
      if (kv_.allocate_slots(seq, seq.num_inflight_tokens + n)) {
        allocated = true;
        break;
      }
      const int64_t victim = running_.back();  // never one scheduled earlier in this loop
      preempt(victim);
      out.preempted.push_back(victim);
      if (victim == seq.id) break;
    }
    if (!allocated) break;  // seq was the last running one
    out.seqs.push_back({seq.id, n, start, start + n - static_cast<int>(draft.size()) == seq.num_tokens(),
                        std::move(draft)});
    mark_scheduled(seq, out.seqs.back());
    budget -= n;
    ++i;
  }

  // Every waiting sequence's prefix read from the lower KV tier starts as soon as it is queued
  // (here, on the first step after add), and runs while other sequences compute.
  // Admission below takes only ready sequences, so what is loading now is still loading after.
  num_prefetching_ = 0;
  for (int64_t id : waiting_) num_prefetching_ += kv_.prefetch_ready(*seqs_.at(id)) ? 0 : 1;

  // Admitting while preempting would only trade one sequence's blocks for another's.
  if (out.preempted.empty()) {
    size_t w = 0;
    while (w < waiting_.size() && budget > 0 &&
           static_cast<int>(running_.size()) < config_.max_num_seqs) {
      Sequence& seq = *seqs_.at(waiting_[w]);
      if (seq.tier_prefetch != TierPrefetch::kReady) {
        ++w;  // its prefix is still being read: the ones behind it may go first
        continue;
      }
      PrefixMatch match = kv_.get_computed_blocks(seq);
      const int remaining = seq.num_tokens() - match.num_tokens(kv_.block_size());
      const int n = chunk_limit(remaining, budget);
      if (!kv_.allocate_slots(seq, n, &match)) break;  // FIFO among ready ones: no jumping
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
      running_.push_back(seq.id);
      seq.status = SeqStatus::kRunning;
      if (seq.num_cached_tokens < 0)
        seq.num_cached_tokens = std::min(std::max(seq.num_computed_tokens, seq.replay_end),
                                         seq.num_prompt_tokens());
      // A failed tier load leaves num_computed_tokens short of the match: this step then
      // computes a chunk that ends before the sequence's last token, and samples nothing.
      const int first = seq.num_computed_tokens;
      out.seqs.push_back({seq.id, n, first, first + n == seq.num_tokens(), {}});
      mark_scheduled(seq, out.seqs.back());
      budget -= n;
    }
  }
  for (const auto& s : out.seqs) out.total_tokens += s.num_new_tokens;
  return out;
}

std::vector<FinishedSeq> Scheduler::update(const ScheduleOutput& out, const StepOutput& step) {
  DI_CHECK(static_cast<int>(step.sampled.size()) == out.num_sampling(),
           "step sampled {} tokens for {} sampling sequences", step.sampled.size(), out.num_sampling());
  DI_CHECK(step.accepted.empty() || step.accepted.size() == step.sampled.size(),
           "step accepted drafts for {} of {} sampled tokens", step.accepted.size(), step.sampled.size());
  std::vector<FinishedSeq> finished;
  static const std::vector<int32_t> kNoDrafts;
  size_t k = 0;
  for (const ScheduledSeq& s : out.seqs) {
    const int32_t token = s.samples ? step.sampled[k] : -1;
    const std::vector<int32_t>& accepted = s.samples && !step.accepted.empty() ? step.accepted[k] : kNoDrafts;
    if (s.samples) ++k;
    auto it = seqs_.find(s.seq_id);
    if (it == seqs_.end()) continue;  // finished since schedule()
    Sequence& seq = *it->second;
    // A sequence preempted since schedule() has no step in flight; its entry is void.
    if (!applies(seq, s)) continue;
    DI_CHECK(accepted.size() <= s.draft_tokens.size(), "seq {}: {} drafts accepted of {}", seq.id,
             accepted.size(), s.draft_tokens.size());
    // Rejected drafts' KV stays in the blocks beyond num_computed_tokens: never cached, and
    // overwritten by the next step, which computes those positions again.
    const int rejected = static_cast<int>(s.draft_tokens.size() - accepted.size());
    seq.num_computed_tokens += s.num_new_tokens - rejected;
    seq.num_inflight_tokens -= s.num_new_tokens;
    if (!s.samples) {
      kv_.cache_full_blocks(seq);
      continue;
    }
    --seq.num_pending_samples;
    FinishReason reason = FinishReason::kNone;
    for (size_t i = 0; i <= accepted.size() && reason == FinishReason::kNone; ++i) {
      const int32_t t = i < accepted.size() ? accepted[i] : token;
      seq.output.push_back(t);
      const bool is_eos = std::find(seq.eos_token_ids.begin(), seq.eos_token_ids.end(), t) !=
                          seq.eos_token_ids.end();
      if (is_eos && !seq.ignore_eos) {
        reason = FinishReason::kStop;
      } else if (static_cast<int>(seq.output.size()) >= seq.max_tokens) {
        reason = FinishReason::kLength;
      }
    }
    // Accepted drafts are in `output` before their blocks are hashed into the prefix cache; a
    // draft after an end (not expected: the engine cuts there) is not computed KV.
    seq.num_computed_tokens = std::min(seq.num_computed_tokens, seq.num_known_tokens() - 1);
    kv_.cache_full_blocks(seq);
    if (reason != FinishReason::kNone) finished.push_back(retire(seq, reason));
  }
  return finished;
}

}  // namespace deepinfer::engine
