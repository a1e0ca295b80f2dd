// See dspark_policy.h.
#include "deepinfer/engine/speculative/dspark_policy.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace deepinfer::engine::speculative {
namespace {

constexpr double kCostDecay = 0.98;  // per forward, in the step cost fit
// A cell's counts are scaled down once they pass this many outcomes, so the estimate follows
// a drifting workload (a few hundred verifications) instead of averaging over the whole run.
constexpr double kMaxCellCount = 400;

// The gate's threshold band on a draft's emission chance. Floor: a draft emitted less than
// one time in twenty costs a row (KV write, logits, sampling) for nothing 19 times in 20, even
// where the cost model sees verification as nearly free (one sequence: the fixed weight read
// dominates). Ceiling: under load the break-even rises towards 1 (a CPU at batch 32 pays
// nearly as much per verified token as per decoded one), and cutting at the break-even would
// give up most accepted drafts (the estimates of a copying sequence's drafts are 0.3-0.9);
// with the ceiling a cut draft is one that is emitted less than one time in ten, so what the
// gate gives up is bounded whatever the load. Replaying fixed-k runs' verifications
// (code-edit, n-gram, batch 1 and 8) through the gate: a threshold of 0.05 cut 8-14% of the
// verified drafts for 4-5% of the accepted ones, 0.10 cut 29-32% for 14-20%: these signals
// (position, match length, the sequence's last outcome) do not separate rejected drafts
// sharply, so a higher ceiling trades accepted drafts for rows almost one for two.
constexpr double kMinKeep = 0.05;
constexpr double kMaxKeep = 0.10;

int history_of(int verified, int accepted) {
  return accepted == 0 ? 1 : accepted < verified ? 2 : 3;
}

}  // namespace

int AcceptanceModel::history(int64_t seq_id) const {
  const auto it = history_.find(seq_id);
  return it == history_.end() ? 0 : it->second;
}

AcceptanceModel::Counts& AcceptanceModel::cell(int position, int history, int signal) {
  return counts_[static_cast<size_t>(std::clamp(position, 0, kMaxDraftTokens - 1))]
                [static_cast<size_t>(history)]
                [static_cast<size_t>(std::clamp(signal, 1, kMaxSignal) - 1)];
}

const AcceptanceModel::Counts& AcceptanceModel::cell(int position, int history, int signal) const {
  return counts_[static_cast<size_t>(std::clamp(position, 0, kMaxDraftTokens - 1))]
                [static_cast<size_t>(history)]
                [static_cast<size_t>(std::clamp(signal, 1, kMaxSignal) - 1)];
}

double AcceptanceModel::estimate(int64_t seq_id, int position, int signal) const {
  const Counts& c = cell(position, history(seq_id), signal);
  return std::clamp(c.accepted / (c.accepted + c.rejected), 0.01, 0.99);
}

void AcceptanceModel::observe(int64_t seq_id, const std::vector<int>& signals, int verified, int accepted) {
  if (verified <= 0) return;
  const int h = history(seq_id);
  auto record = [&](int position, bool ok) {
    const int signal = signals.empty() ? 1 : signals[std::min(static_cast<size_t>(position), signals.size() - 1)];
    Counts& c = cell(position, h, signal);
    (ok ? c.accepted : c.rejected) += 1;
    if (const double n = c.accepted + c.rejected; n > kMaxCellCount) {
      c.accepted *= kMaxCellCount / n;
      c.rejected *= kMaxCellCount / n;
    }
  };
  // Positions after the first rejection were not tested: the estimate is conditional.
  for (int j = 0; j < accepted; ++j) record(j, true);
  if (accepted < verified) record(accepted, false);
  history_[seq_id] = history_of(verified, accepted);
}

void StepCostModel::observe(int tokens, double seconds) {
  const double x = tokens;
  w_ = kCostDecay * w_ + 1;
  x_ = kCostDecay * x_ + x;
  y_ = kCostDecay * y_ + seconds;
  xx_ = kCostDecay * xx_ + x * x;
  xy_ = kCostDecay * xy_ + x * seconds;
  ++n_;
}

double StepCostModel::per_token_seconds() const {
  const double var = xx_ * w_ - x_ * x_;
  // Steps that all computed about as many tokens say nothing about the slope yet: assume
  // verification is free until they do (the fixed weight read dominates a decode step).
  if (w_ <= 0 || var <= 1e-9 * w_ * w_) return 0;
  return std::max(0.0, (xy_ * w_ - x_ * y_) / var);
}

double StepCostModel::fixed_seconds() const {
  if (w_ <= 0) return 0;
  return std::max(1e-6, (y_ - per_token_seconds() * x_) / w_);
}

double dspark_threshold(int tokens, double emitted, const StepCostModel& cost) {
  if (!cost.ready()) return kMinKeep;
  const double b = cost.per_token_seconds();
  // One more row raises tokens per second iff (E + p) / (T + b) > E / T, i.e. p > b E / T.
  const double break_even = b * std::max(1.0, emitted) / (cost.fixed_seconds() + b * tokens);
  return std::clamp(break_even, kMinKeep, kMaxKeep);
}

std::vector<int> dspark_select(const std::vector<std::vector<double>>& emit_probs, int base_tokens,
                               int base_emitted, const StepCostModel& cost) {
  std::vector<int> take(emit_probs.size(), 0);
  std::vector<std::tuple<double, size_t, size_t>> cands;  // (P emit, sequence, draft)
  for (size_t i = 0; i < emit_probs.size(); ++i)
    for (size_t j = 0; j < emit_probs[i].size(); ++j) cands.emplace_back(emit_probs[i][j], i, j);
  // Best first; a sequence's drafts keep their order (their probabilities never increase).
  std::stable_sort(cands.begin(), cands.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  // Every sequence's first draft is verified: cutting it saves one row but would leave the
  // estimate of a sequence that looks unlikely never tested again (it would stay as low as it
  // once was), and a rejected first draft still yields the target's token at that position.
  double expected = base_emitted;
  int tokens = base_tokens;
  for (size_t i = 0; i < emit_probs.size(); ++i) {
    if (emit_probs[i].empty()) continue;
    take[i] = 1;
    expected += emit_probs[i][0];
    ++tokens;
  }
  for (const auto& [p, i, j] : cands) {
    if (static_cast<int>(j) != take[i]) continue;  // an earlier draft of it was left out
    if (p < dspark_threshold(tokens, expected, cost)) break;
    take[i] = static_cast<int>(j) + 1;
    expected += p;
    ++tokens;
  }
  return take;
}

}  // namespace deepinfer::engine::speculative
