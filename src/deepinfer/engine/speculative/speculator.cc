// See speculator.h.
#include "deepinfer/engine/speculative/speculator.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deepinfer/base/log.h"
#include "deepinfer/base/timer.h"

namespace deepinfer::engine::speculative {

Status validate(const SpeculativeConfig& config) {
  if (!config.draft_model.empty() && config.method != "draft")
    return invalid_argument("--draft-model {}: needs --speculative draft{}", config.draft_model,
                            config.method.empty() ? "" : fmt::format(" (got --speculative {})", config.method));
  if (config.draft_kv_cache_bytes > 0 && config.method != "draft")
    return invalid_argument("--draft-kv-cache-gb: needs --speculative draft");
  if (config.method.empty()) return Status::ok();
  if (config.method == "draft" && config.draft_model.empty())
    return invalid_argument("--speculative draft needs --draft-model PATH_OR_NAME (a model sharing the "
                            "target's tokenizer)");
  if (config.method != "ngram" && config.method != "draft" && config.method != "mtp")
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

namespace {

// An n-gram draft's signal at position j (1..6): whether the other occurrences of the matched
// n-gram continue as the draft does (Draft::support, agree: the occurrences part, i.e. some
// that followed the draft so far have another token here; a single occurrence; two or more,
// all agreeing) times whether the source agrees with the sequence's end 8 tokens back or more
// (a span being copied). Replaying fixed-k traces (bench/spec_trace_replay.py,
// docs/benchmarks.md) the conditional acceptance of code-edit's drafts was 20% where the
// occurrences part, 71% for a single one with a short agreement and 100% where all agree over
// a long one; the agreement length alone ranged over 34-100% with little order.
int ngram_signal(const Draft& d, size_t j) {
  int agreement = 1;  // a single occurrence
  if (j < d.support.size() && j < d.agree.size() && d.support[j] > 1)
    agreement = d.agree[j] == d.support[j] ? 2 : 0;
  const bool span = std::max(d.match_length, d.context_match) >= 8;
  return agreement * 2 + (span ? 1 : 0) + 1;
}

}  // namespace

Speculator::Speculator(const SpeculativeConfig& config, std::unique_ptr<Drafter> drafter)
    : config_(config), drafter_(drafter ? std::move(drafter) : make_ngram_drafter()) {
  if (!config_.trace_path.empty()) {
    trace_.reset(std::fopen(config_.trace_path.c_str(), "w"));
    if (!trace_) log::warn("speculative trace {}: cannot open for writing; not tracing", config_.trace_path);
  }
}

std::vector<int> Speculator::draft_caps(const std::vector<DraftRequest>& requests, int num_running) const {
  std::vector<int> cap(requests.size(), kMaxDraftTokens);
  // Drafting is free for the n-gram drafter, a forward per position for a draft model or an MTP
  // head: with DSpark, those draft only the positions DSpark would verify were every draft of
  // the strongest signal (a full batch on a CPU verifies few), not k that are then mostly cut.
  if (config_.policy != SpecPolicy::kDspark || config_.method == "ngram") return cap;
  std::vector<std::vector<double>> emit(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    double p = 1;
    for (int j = 0; j < std::min(config_.num_draft_tokens, requests[i].max_drafts); ++j) {
      p *= acceptance_.estimate(requests[i].seq_id, j, 4);
      emit[i].push_back(p);
    }
  }
  return dspark_select(emit, num_running, num_running, cost_);
}

std::vector<std::vector<int32_t>> Speculator::propose(const std::vector<DraftRequest>& requests,
                                                      int num_running) {
  std::vector<std::vector<int32_t>> out(requests.size());
  std::vector<std::vector<double>> emit(requests.size());
  std::vector<std::vector<int>> signals(requests.size());
  std::vector<Draft> features(trace_ ? requests.size() : 0);
  std::vector<DraftInput> inputs;
  std::vector<size_t> index;  // [inputs.size()] the request each input is for
  const std::vector<int> cap = draft_caps(requests, num_running);
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    const int k = std::min({config_.num_draft_tokens, r.max_drafts, cap[i]});
    if (k <= 0) continue;
    inputs.push_back({r.seq_id, r.tokens, k});
    index.push_back(i);
  }
  const double t0 = now_seconds();
  std::vector<Draft> drafts = inputs.empty() ? std::vector<Draft>{} : drafter_->propose(inputs);
  stats_.draft_seconds += now_seconds() - t0;
  for (size_t n = 0; n < drafts.size(); ++n) {
    const size_t i = index[n];
    Draft& d = drafts[n];
    d.tokens.resize(std::min(d.tokens.size(), static_cast<size_t>(inputs[n].max_tokens)));
    stats_.drafted += static_cast<int64_t>(d.tokens.size());
    if (d.signals.empty())
      for (size_t j = 0; j < d.tokens.size(); ++j) d.signals.push_back(ngram_signal(d, j));
    double p = 1;
    for (size_t j = 0; j < d.tokens.size(); ++j) {
      p *= acceptance_.estimate(requests[i].seq_id, static_cast<int>(j), d.signals[j]);
      emit[i].push_back(p);
    }
    signals[i] = std::move(d.signals);
    out[i] = std::move(d.tokens);
    if (trace_) {
      d.tokens.clear();
      features[i] = std::move(d);
    }
  }
  if (config_.policy == SpecPolicy::kDspark) {
    const std::vector<int> take = dspark_select(emit, num_running, num_running, cost_);
    for (size_t i = 0; i < out.size(); ++i) out[i].resize(static_cast<size_t>(take[i]));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) continue;
    InFlight& f = in_flight_[requests[i].seq_id];
    f.signals = std::move(signals[i]);
    if (!trace_) continue;
    f.features = std::move(features[i]);
    f.emit = std::move(emit[i]);
    const auto it = last_logprob_.find(requests[i].seq_id);
    f.target_logprob = it == last_logprob_.end() ? 1.0f : it->second;
  }
  return out;
}

void Speculator::cut(int64_t seq_id, int kept) {
  if (kept == 0) in_flight_.erase(seq_id);
}

void Speculator::write_trace(int64_t seq_id, const InFlight& f, int verified, int accepted) {
  const Draft& d = f.features;
  fmt::print(trace_.get(),
             "{{\"seq\":{},\"verified\":{},\"accepted\":{},\"match_length\":{},\"context_match\":{},"
             "\"occurrences\":{},\"distance\":{},\"target_logprob\":{},\"signals\":[{}],\"support\":[{}],"
             "\"agree\":[{}],\"emit\":[{:.4f}]}}\n",
             seq_id, verified, accepted, d.match_length, d.context_match, d.occurrences, d.distance,
             f.target_logprob, fmt::join(f.signals, ","), fmt::join(d.support, ","), fmt::join(d.agree, ","),
             fmt::join(f.emit, ","));
}

void Speculator::observe(int64_t seq_id, int verified, int accepted) {
  InFlight f;
  if (auto it = in_flight_.find(seq_id); it != in_flight_.end()) {
    f = std::move(it->second);
    in_flight_.erase(it);
  }
  if (verified <= 0) return;
  if (trace_) write_trace(seq_id, f, verified, accepted);
  const std::vector<int>& signals = f.signals;
  acceptance_.observe(seq_id, signals, verified, accepted);
  stats_.verified += verified;
  stats_.accepted += accepted;
  ++stats_.accepted_histogram[static_cast<size_t>(std::min(accepted, kMaxDraftTokens))];
  ++stats_.verified_histogram[static_cast<size_t>(std::min(verified, kMaxDraftTokens))];
}

void Speculator::forget(int64_t seq_id) {
  in_flight_.erase(seq_id);
  last_logprob_.erase(seq_id);
  acceptance_.forget(seq_id);
  drafter_->forget(seq_id);
}

}  // namespace deepinfer::engine::speculative
