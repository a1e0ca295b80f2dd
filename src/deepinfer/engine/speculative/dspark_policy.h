// DSpark-style gating of speculative verification for drafters without a trained confidence
// head: how many of each sequence's drafts a step verifies, from an online per-token
// acceptance estimate and a step budget that follows load.
//
// Estimate: P(draft j accepted | drafts before it accepted), from Beta counts per (draft
// position, n-gram match length bucket), updated after every verification, blended with the
// sequence's own recent acceptance (an exponential average). The chance that draft j is
// emitted is the product of the estimates up to j.
//
// Budget: a step's time is modelled as fixed + per_token * tokens (least squares over recent
// forwards, measured from the running engine). Drafts are taken best first while one more
// raises the expected tokens per second: P_emit > per_token * E / T, with E the tokens the step
// is expected to emit and T its modelled time. One sequence: T is mostly the fixed weight read,
// so most drafts pass; a full batch: only the likely ones do.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace deepinfer::engine::speculative {

inline constexpr int kMaxDraftTokens = 16;  // --num-draft-tokens limit

class AcceptanceModel {
 public:
  // Conditional acceptance estimate of the draft at `position` (0 = first). `signal`: the
  // drafter's confidence in it, 1..4 (the n-gram match length, or a draft model's probability
  // bucket; Draft::signals).
  double estimate(int64_t seq_id, int position, int signal) const;
  // A verification: the first `verified` drafts were checked and `accepted` of them passed;
  // signals[j] was draft j's signal (the last one stands for any beyond; empty = 1).
  void observe(int64_t seq_id, const std::vector<int>& signals, int verified, int accepted);
  void observe(int64_t seq_id, int match_length, int verified, int accepted) {
    observe(seq_id, std::vector<int>{match_length}, verified, accepted);
  }
  void forget(int64_t seq_id) { recent_.erase(seq_id); }

 private:
  static constexpr int kBuckets = 4;  // signal (match length) 1, 2, 3, 4+
  struct Counts {
    double accepted = 1;  // Beta(1, 1) prior
    double rejected = 1;
  };
  std::array<std::array<Counts, kBuckets>, kMaxDraftTokens> counts_{};
  std::unordered_map<int64_t, double> recent_;  // per sequence: average of recent outcomes
};

class StepCostModel {
 public:
  void observe(int tokens, double seconds);
  bool ready() const { return n_ >= 4; }
  double fixed_seconds() const;
  double per_token_seconds() const;

 private:
  // Exponentially weighted sums for the least-squares line seconds = a + b * tokens.
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;
  int n_ = 0;
};

// For each sequence, `emit_probs[i]` = the chance each of its drafts is emitted (non
// increasing). `base_tokens`: tokens the step computes anyway; `base_emitted`: tokens it emits
// anyway (one per decoding sequence). Returns how many leading drafts of each to verify.
std::vector<int> dspark_select(const std::vector<std::vector<double>>& emit_probs, int base_tokens,
                               int base_emitted, const StepCostModel& cost);

}  // namespace deepinfer::engine::speculative
