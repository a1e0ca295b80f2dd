// See speculator.h.
#include "deepinfer/engine/speculative/speculator.h"

#include <algorithm>

namespace deepinfer::engine::speculative {

Status validate(const SpeculativeConfig& config) {
  if (config.method.empty()) return Status::ok();
  if (config.method == "draft" || config.method == "mtp")
    return invalid_argument("--speculative {}: this drafter is not built yet; use --speculative ngram",
                            config.method);
  if (config.method != "ngram")
    return invalid_argument("--speculative {}: unknown drafter (expected ngram, draft or mtp)", config.method);
  if (config.num_draft_tokens < 1 || config.num_draft_tokens > kMaxDraftTokens)
    return invalid_argument("--num-draft-tokens {}: must be between 1 and {}", config.num_draft_tokens,
                            kMaxDraftTokens);
  return Status::ok();
}

Result<SpecPolicy> parse_spec_policy(const std::string& name) {
  if (name == "fixed") return SpecPolicy::kFixed;
  if (name == "dspark") return SpecPolicy::kDspark;
  return invalid_argument("--spec-policy {}: expected fixed or dspark", name);
}

Speculator::Speculator(const SpeculativeConfig& config) : config_(config), drafter_(make_ngram_drafter()) {}

std::vector<std::vector<int32_t>> Speculator::propose(const std::vector<DraftRequest>& requests,
                                                      int num_running) {
  std::vector<std::vector<int32_t>> out(requests.size());
  std::vector<std::vector<double>> emit(requests.size());
  std::vector<int> match(requests.size(), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    const int k = std::min(config_.num_draft_tokens, r.max_drafts);
    if (k <= 0) continue;
    Draft d = drafter_->propose(r.tokens, k);
    stats_.drafted += static_cast<int64_t>(d.tokens.size());
    match[i] = d.match_length;
    double p = 1;
    for (size_t j = 0; j < d.tokens.size(); ++j) {
      p *= acceptance_.estimate(r.seq_id, static_cast<int>(j), d.match_length);
      emit[i].push_back(p);
    }
    out[i] = std::move(d.tokens);
  }
  if (config_.policy == SpecPolicy::kDspark) {
    const std::vector<int> take = dspark_select(emit, num_running, num_running, cost_);
    for (size_t i = 0; i < out.size(); ++i) out[i].resize(static_cast<size_t>(take[i]));
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].empty()) match_length_[requests[i].seq_id] = match[i];
  return out;
}

void Speculator::cut(int64_t seq_id, int kept) {
  if (kept == 0) match_length_.erase(seq_id);
}

void Speculator::observe(int64_t seq_id, int verified, int accepted) {
  auto it = match_length_.find(seq_id);
  const int match = it == match_length_.end() ? 1 : it->second;
  if (it != match_length_.end()) match_length_.erase(it);
  if (verified <= 0) return;
  acceptance_.observe(seq_id, match, verified, accepted);
  stats_.verified += verified;
  stats_.accepted += accepted;
  ++stats_.accepted_histogram[static_cast<size_t>(std::min(accepted, kMaxDraftTokens))];
  ++stats_.verified_histogram[static_cast<size_t>(std::min(verified, kMaxDraftTokens))];
}

void Speculator::forget(int64_t seq_id) {
  match_length_.erase(seq_id);
  acceptance_.forget(seq_id);
}

}  // namespace deepinfer::engine::speculative
