// The values that cross the engine / model-runner seam (vLLM v1's SchedulerOutput ->
// ModelRunnerOutput): what to run (RunnerInput), how to sample its rows (SamplingInput) and
// what came out (RunnerOutput). Plain data only: no scheduler, request or grammar objects, so
// a runner can later live in another thread, process or host without the engine changing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/engine/sampler.h"
#include "deepinfer/engine/sampling_params.h"

namespace deepinfer::engine {

// One scheduled sequence of a step: the tokens whose KV this step computes.
struct RunnerSeq {
  int64_t seq_id = 0;
  int first_position = 0;            // position of token_ids[0] (= tokens already in the KV cache)
  std::vector<int32_t> token_ids;    // [num_new_tokens] Sequence::kPendingToken = sampled by the
                                     // step in flight (overlap); filled in before execute()
  std::vector<int32_t> block_table;  // [ceil((first_position + num_new_tokens) / block_size)]
  std::vector<int32_t> recent_slabs;  // hybrid caches: [block_table.size()] each block's recent
                                      // slab, -1 = none; empty otherwise
  // Hybrid caches: a bounded replay in progress (Sequence::replay_start/end); 0, 0 = none.
  int replay_start = 0;
  int replay_end = 0;
  // Decoder-side saving (Sequence::tail_from) while the step computes the admitted span's
  // tokens; -1 = none.
  int tail_from = -1;
  // Models that read token ids before the step (KvCacheSpec::token_history = k > 0): [k] the
  // ids at first_position - k .. first_position - 1, -1 before position 0; empty otherwise.
  std::vector<int32_t> token_history = {};
  bool samples = false;              // its last token's logits are sampled (one row each)
  // Speculative decoding: the last num_draft of token_ids are drafts; the sequence then has
  // num_draft + 1 logits rows (each draft's position and the one before it), all for sample().
  int num_draft = 0;
  // Prompt logprobs: the token after each of the positions first_position, first_position + 1,
  // ... is scored (its logprob under the model's raw logits). [k <= num_new_tokens, and
  // < num_new_tokens when the sequence samples]; empty = none.
  std::vector<int32_t> score_tokens;
  int score_top_n = 0;  // how many most likely tokens to report per scored position
  // Image positions among token_ids: their input embeddings replace the token embeddings.
  std::vector<int32_t> embed_rows;  // [n_embed] indices into token_ids
  std::vector<float> embeds;        // [n_embed * hidden_size]
  int num_new_tokens() const { return static_cast<int>(token_ids.size()); }
};

struct RunnerInput {
  std::vector<RunnerSeq> seqs;  // [scheduled seqs] in ScheduleOutput order
  // Layer-by-layer KV export (model::ForwardContext::after_layer); null: none this step.
  std::function<void(int layer)> after_layer = nullptr;
  int num_sampling() const {
    int n = 0;
    for (const auto& s : seqs) n += s.samples ? 1 : 0;
    return n;
  }
};

// Speculative verification of one row: the drafts to check in order (at most the RunnerSeq's
// num_draft; the engine may cut some after the forward) and, with a grammar, the mask at the
// position after each of them.
struct DraftCheck {
  std::vector<int32_t> tokens;                     // [k]
  std::vector<std::vector<uint32_t>> allowed_masks;  // [k] or empty (no grammar)
};

// How to sample one logits row. The engine fills it after the step is scheduled and its
// grammar matchers have taken the previous token, which may be while the forward runs.
struct SamplingRow {
  bool skip = false;  // the sequence ended or was preempted since scheduling: draw nothing
  SamplingParams params;
  uint64_t request_key = 0;  // the draw stream when params.has_seed is false
  uint64_t step = 0;         // index of the token drawn (0 = first generated)
  // Prompt then generated ids; filled only when a penalty needs them (the sampler then reads it).
  std::vector<int32_t> history;
  size_t num_prompt = 0;  // how many of history are prompt
  // [ceil(vocab / 32)] bit i set = token i allowed; empty = every token allowed.
  std::vector<uint32_t> allowed_mask;
  DraftCheck draft;  // speculative decoding: verified against this row's logits rows
};

struct SamplingInput {
  std::vector<SamplingRow> rows;  // [RunnerInput::num_sampling()] in RunnerInput order
};

struct SampledRow {
  int32_t token = -1;  // -1: skipped, failed, or nothing allowed (mask, bias)
  float logprob = 0;   // when params.logprobs >= 0
  std::vector<TokenLogprob> top_logprobs;  // [min(params.logprobs, allowed)] best first
  std::string error;   // set when the row cannot be sampled (e.g. non-finite logits)
  // Speculative decoding: the accepted drafts, each with its logprobs, which come before
  // `token` (then the target's own token at the first rejected position, or the bonus).
  std::vector<SampledRow> accepted;
};

// The scored tokens of one sequence (RunnerSeq::score_tokens): rows[i] is the token after
// position first_position + i, its logprob and the top logprobs there.
struct ScoredTokens {
  int64_t seq_id = 0;
  int first_position = 0;
  std::vector<SampledRow> rows;
  std::string error;  // non-finite logits: rows is empty
};

struct RunnerOutput {
  std::vector<SampledRow> rows;        // [SamplingInput::rows.size()]
  std::vector<ScoredTokens> scored;    // one per RunnerSeq with score_tokens, in input order
};

}  // namespace deepinfer::engine
