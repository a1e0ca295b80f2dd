// See dspark_policy.h.
#include "deepinfer/engine/speculative/dspark_policy.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace deepinfer::engine::speculative {
namespace {

constexpr double kRecentWeight = 0.2;  // per outcome, in the sequence's running average
constexpr double kCostDecay = 0.98;    // per forward, in the step cost fit

int bucket_of(int match_length) { return std::clamp(match_length, 1, 4) - 1; }

}  // namespace

double AcceptanceModel::estimate(int64_t seq_id, int position, int signal) const {
  const Counts& c = counts_[static_cast<size_t>(std::clamp(position, 0, kMaxDraftTokens - 1))]
                           [static_cast<size_t>(bucket_of(signal))];
  double p = c.accepted / (c.accepted + c.rejected);
  if (auto it = recent_.find(seq_id); it != recent_.end()) p = 0.5 * p + 0.5 * it->second;
  return std::clamp(p, 0.01, 0.99);
}

void AcceptanceModel::observe(int64_t seq_id, const std::vector<int>& signals, int verified, int accepted) {
  auto [it, fresh] = recent_.try_emplace(seq_id, 0.5);
  auto record = [&](int position, bool ok) {
    const int signal = signals.empty() ? 1 : signals[std::min(static_cast<size_t>(position), signals.size() - 1)];
    Counts& c = counts_[static_cast<size_t>(std::min(position, kMaxDraftTokens - 1))]
                       [static_cast<size_t>(bucket_of(signal))];
    (ok ? c.accepted : c.rejected) += 1;
    it->second = (1 - kRecentWeight) * it->second + kRecentWeight * (ok ? 1.0 : 0.0);
  };
  // Positions after the first rejection were not tested: the estimate is conditional.
  for (int j = 0; j < accepted; ++j) record(j, true);
  if (accepted < verified) record(accepted, false);
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

std::vector<int> dspark_select(const std::vector<std::vector<double>>& emit_probs, int base_tokens,
                               int base_emitted, const StepCostModel& cost) {
  std::vector<int> take(emit_probs.size(), 0);
  std::vector<std::tuple<double, size_t, size_t>> cands;  // (P emit, sequence, draft)
  for (size_t i = 0; i < emit_probs.size(); ++i)
    for (size_t j = 0; j < emit_probs[i].size(); ++j) cands.emplace_back(emit_probs[i][j], i, j);
  // Best first; a sequence's drafts keep their order (their probabilities never increase).
  std::stable_sort(cands.begin(), cands.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  const double b = cost.ready() ? cost.per_token_seconds() : 0.0;
  double expected = std::max(1, base_emitted);
  double time = (cost.ready() ? cost.fixed_seconds() : 1.0) + b * base_tokens;
  for (const auto& [p, i, j] : cands) {
    if (static_cast<int>(j) != take[i]) continue;  // an earlier draft of it was left out
    if (p * time <= b * expected) break;           // (E + p) / (T + b) <= E / T
    take[i] = static_cast<int>(j) + 1;
    expected += p;
    time += b;
  }
  return take;
}

}  // namespace deepinfer::engine::speculative
