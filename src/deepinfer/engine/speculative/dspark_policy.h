// DSpark-style gating of speculative verification for drafters without a trained confidence
// head: how many of each sequence's drafts a step verifies, from an online per-token
// acceptance estimate and a threshold that follows the step's cost.
//
// Estimate: P(draft j accepted | drafts before it accepted), from Beta counts per (draft
// position, drafter signal, the sequence's last verification), updated after every
// verification. The chance that draft j is emitted is the product of the estimates up to j.
//
// Gate: each sequence's draft is cut where its emission chance drops below a threshold tau.
// tau is the break-even of one more verified token under the step cost model
// (per_token * E / T: E the tokens the step is expected to emit, T its modelled time; a draft
// below it lowers the step's tokens per second), kept within a band: below its floor a draft
// is never worth a row, above its ceiling it is always kept, so the drafts that are likely
// accepted are verified whatever the load and what the gate gives up is bounded.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace deepinfer::engine::speculative {

inline constexpr int kMaxDraftTokens = 16;  // --num-draft-tokens limit
inline constexpr int kMaxSignal = 6;        // Draft::signals range: 1 (weak) .. kMaxSignal

class AcceptanceModel {
 public:
  // Conditional acceptance estimate of the draft at `position` (0 = first). `signal`: the
  // drafter's confidence in it, 1..kMaxSignal (Draft::signals).
  double estimate(int64_t seq_id, int position, int signal) const;
  // A verification: the first `verified` drafts were checked and `accepted` of them passed;
  // signals[j] was draft j's signal (the last one stands for any beyond; empty = 1).
  void observe(int64_t seq_id, const std::vector<int>& signals, int verified, int accepted);
  void observe(int64_t seq_id, int signal, int verified, int accepted) {
    observe(seq_id, std::vector<int>{signal}, verified, accepted);
  }
  void forget(int64_t seq_id) { history_.erase(seq_id); }

 private:
  // The sequence's last verification: none yet, its first draft rejected, some accepted,
  // all accepted. A sequence copying a span keeps copying; one off its source stays off.
  static constexpr int kHistories = 4;
  struct Counts {
    double accepted = 1;  // Beta(1, 1) prior
    double rejected = 1;
  };
  int history(int64_t seq_id) const;
  Counts& cell(int position, int history, int signal);
  const Counts& cell(int position, int history, int signal) const;

  std::array<std::array<std::array<Counts, kMaxSignal>, kHistories>, kMaxDraftTokens> counts_{};
  std::unordered_map<int64_t, int> history_;  // per sequence: its last verification's kind
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

// The emission-chance threshold for a step computing `tokens` tokens and expected to emit
// `emitted`: the cost model's break-even, within [kMinKeep, kMaxKeep] (dspark_policy.cc).
double dspark_threshold(int tokens, double emitted, const StepCostModel& cost);

// For each sequence, `emit_probs[i]` = the chance each of its drafts is emitted (non
// increasing). `base_tokens`: tokens the step computes anyway; `base_emitted`: tokens it emits
// anyway (one per decoding sequence). Returns how many leading drafts of each to verify.
std::vector<int> dspark_select(const std::vector<std::vector<double>>& emit_probs, int base_tokens,
                               int base_emitted, const StepCostModel& cost);

}  // namespace deepinfer::engine::speculative
