// The engine's speculative-decoding state: the drafter, the verification policy (fixed k or
// DSpark gating), the acceptance and step-cost models, and the counters. The engine asks it
// for drafts before scheduling a step and reports each verification and forward back.
#pragma once

#include <array>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/speculative/drafter.h"
#include "deepinfer/engine/speculative/dspark_policy.h"

namespace deepinfer::model {
class Model;
}

namespace deepinfer::engine::speculative {

enum class SpecPolicy { kFixed, kDspark };

struct SpeculativeConfig {
  std::string method;        // "" = off; "ngram", "draft" or "mtp"
  int num_draft_tokens = 4;  // k: most drafts per sequence and step, 1..kMaxDraftTokens
  SpecPolicy policy = SpecPolicy::kDspark;
  // method "draft": --draft-model as given (file, directory or catalogue name; for messages),
  // and the loaded draft model (load_draft_model in draft_model_load.h checks its vocabulary
  // against the target's tokenizer). Engine::create refuses "draft" without the weights.
  std::string draft_model;
  std::shared_ptr<model::Model> draft_weights;
  // The draft model's own KV pool in bytes (--draft-kv-cache-gb); 0 = room for as many tokens
  // as the target's pool holds, so drafting never runs short before the target does.
  size_t draft_kv_cache_bytes = 0;
  // bench --mode spec --spec-trace: a file that gets one JSON line per verification (the
  // drafts' signals and features, how many were verified and accepted), for replaying the
  // gate offline (bench/spec_trace_replay.py). Empty = none.
  std::string trace_path;
};

// Checks a config's flags: unknown method, k out of range, --draft-model without
// --speculative draft and the reverse. The message is one line.
Status validate(const SpeculativeConfig& config);
Result<SpecPolicy> parse_spec_policy(const std::string& name);

struct SpecStats {
  int64_t steps = 0;      // forwards that verified at least one draft
  int64_t drafted = 0;    // drafts proposed by the drafter
  int64_t verified = 0;   // drafts computed and checked by the target
  int64_t accepted = 0;   // drafts accepted (emitted as output)
  double draft_seconds = 0;  // wall time in the drafter (a draft model's forwards)
  // Sequence-steps with a verification, by how many drafts they accepted: [0..kMaxDraftTokens].
  std::array<int64_t, kMaxDraftTokens + 1> accepted_histogram{};
  // And by how many they verified.
  std::array<int64_t, kMaxDraftTokens + 1> verified_histogram{};
};

struct DraftRequest {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;  // prompt then output
  int max_drafts = 0;               // room left (max_tokens); <= 0: none
};

class Speculator {
 public:
  // `drafter`: null = the n-gram drafter (method "ngram").
  explicit Speculator(const SpeculativeConfig& config, std::unique_ptr<Drafter> drafter = nullptr);
  // Drafts for the step about to be scheduled: [requests.size()] (possibly empty each),
  // gated by the policy. `num_running`: sequences the step is expected to compute.
  std::vector<std::vector<int32_t>> propose(const std::vector<DraftRequest>& requests, int num_running);
  // The drafter's proposal was cut to `kept` before scheduling (a grammar forbade the rest).
  void cut(int64_t seq_id, int kept);
  // A verification of the drafts proposed for seq_id: `verified` checked, `accepted` passed.
  void observe(int64_t seq_id, int verified, int accepted);
  // A forward that computed `tokens` tokens, `drafts` of them drafts.
  void observe_forward(int tokens, int drafts, double seconds) {
    cost_.observe(tokens, seconds);
    stats_.steps += drafts > 0 ? 1 : 0;
  }
  // After a target forward: which rows computed which sequence's positions (Drafter::target_computed).
  void target_computed(std::span<const ComputedSpan> spans) { drafter_->target_computed(spans); }
  void forget(int64_t seq_id);
  // The target's logprob of the token it just emitted for seq_id (requests asking for
  // logprobs only): written to the trace with the sequence's next drafts.
  void note_emitted(int64_t seq_id, float logprob) {
    if (trace_) last_logprob_[seq_id] = logprob;
  }
  const SpecStats& stats() const { return stats_; }
  const SpeculativeConfig& config() const { return config_; }

 private:
  // Most drafts to ask of the drafter per request (DSpark with a draft model: see .cc).
  std::vector<int> draft_caps(const std::vector<DraftRequest>& requests, int num_running) const;

  SpeculativeConfig config_;
  std::unique_ptr<Drafter> drafter_;
  AcceptanceModel acceptance_;
  StepCostModel cost_;
  // Of each sequence's drafts in flight: their signals, and for the trace the drafter's
  // features (tokens emptied) and what the gate estimated.
  struct InFlight {
    std::vector<int> signals;
    Draft features;
    std::vector<double> emit;
    float target_logprob = 1;  // 1: not known
  };
  void write_trace(int64_t seq_id, const InFlight& f, int verified, int accepted);

  std::unordered_map<int64_t, InFlight> in_flight_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> trace_{nullptr, &std::fclose};
  std::unordered_map<int64_t, float> last_logprob_;
  SpecStats stats_;
};

}  // namespace deepinfer::engine::speculative
