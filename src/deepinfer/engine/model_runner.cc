// The CPU model runner: one forward per step on the thread pool, then sampling row by row.
#include "deepinfer/engine/model_runner.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/batch_builder.h"
#include "deepinfer/engine/speculative/verify.h"

namespace deepinfer::engine {
namespace {

int count_non_finite(const float* row, int32_t vocab) {
  int n = 0;
  for (int32_t i = 0; i < vocab; ++i) n += std::isfinite(row[i]) ? 0 : 1;
  return n;
}

std::string non_finite_message(int bad, int32_t vocab, int position) {
  return fmt::format(
      "the model produced non-finite logits ({} of {} values are NaN or infinite) for the token after "
      "position {}: the weights or the computation are broken",
      bad, vocab, position);
}

}  // namespace

ModelRunner::ModelRunner(std::unique_ptr<model::Model> model, const ModelRunnerConfig& config)
    : config_(config), model_(std::move(model)), pool_(std::make_unique<ThreadPool>(config.num_threads)) {
  model::KvCacheSpec spec = model_->kv_cache_spec();
  spec.dtype = config.kv_dtype;
  kv_ = model::KvCache::allocate(spec, config.num_kv_blocks, config.block_size, config.num_recent_slabs);
}

Status ModelRunner::execute(const RunnerInput& in) {
  num_rows_ = 0;
  BatchInputs b = build_forward_batch(in, config_.block_size);
  DI_CHECK(b.pending_token_index.empty(), "a batch runs with {} tokens not sampled yet",
           b.pending_token_index.size());
  b.batch.slot_mapping = std::move(b.slot_mapping);
  const int64_t vocab = model_->config().vocab_size;
  logits_.resize(b.batch.logits_rows.size() * static_cast<size_t>(vocab));
  model::ForwardContext ctx{pool_.get(), config_.batch_invariant, config_.int8_activations, in.after_layer};
  DI_RETURN_IF_ERROR(model_->forward(b.batch, kv_, ctx, logits_.data()));
  // Rows come per sequence in input order: its scored positions, then its sampling row.
  sample_row_.clear();
  sample_drafts_.clear();
  row_position_.clear();
  scored_.clear();
  size_t row = 0;
  for (const RunnerSeq& s : in.seqs) {
    if (!s.score_tokens.empty()) {
      scored_.push_back({s.seq_id, s.first_position, row, s.score_tokens, s.score_top_n});
      row += s.score_tokens.size();
    }
    if (s.samples) {
      sample_row_.push_back(row);
      sample_drafts_.push_back(s.num_draft);
      row_position_.push_back(b.batch.positions[static_cast<size_t>(b.batch.logits_rows[row])]);
      row += static_cast<size_t>(s.num_draft) + 1;
    }
  }
  num_rows_ = static_cast<int>(sample_row_.size());
  return Status::ok();
}

RunnerOutput ModelRunner::sample(const SamplingInput& in) {
  DI_CHECK(static_cast<int>(in.rows.size()) == num_rows_, "{} sampling rows for {} logits rows",
           in.rows.size(), num_rows_);
  const int32_t vocab = vocab_size();
  RunnerOutput out;
  out.rows.resize(in.rows.size());
  for (size_t i = 0; i < in.rows.size(); ++i) {
    const SamplingRow& row = in.rows[i];
    SampledRow& res = out.rows[i];
    if (row.skip) continue;
    const float* logits = logits_.data() + sample_row_[i] * static_cast<size_t>(vocab);
    DI_CHECK(static_cast<int>(row.draft.tokens.size()) <= sample_drafts_[i], "row {}: {} drafts to verify, {} computed",
             i, row.draft.tokens.size(), sample_drafts_[i]);
    if (!row.draft.tokens.empty()) {
      res = speculative::verify_drafts(logits, vocab, static_cast<size_t>(sample_drafts_[i]) + 1, row);
      continue;
    }
    if (const int bad = count_non_finite(logits, vocab); bad > 0) {
      res.error = non_finite_message(bad, vocab, row_position_[i]);
      continue;
    }
    DI_CHECK(row.allowed_mask.empty() || row.allowed_mask.size() == static_cast<size_t>((vocab + 31) / 32),
             "row {}: allowed mask of {} words for a vocabulary of {}", i, row.allowed_mask.size(), vocab);
    SampleResult sr = engine::sample(logits, vocab, row.params, SamplerState{row.history, row.num_prompt},
                                     row.request_key, row.step,
                                     row.allowed_mask.empty() ? nullptr : row.allowed_mask.data());
    res.token = sr.token;
    res.logprob = sr.logprob;
    res.top_logprobs = std::move(sr.top_logprobs);
  }
  for (const Scored& s : scored_) out.scored.push_back(score(s));
  num_rows_ = 0;
  scored_.clear();
  return out;
}

ScoredTokens ModelRunner::score(const Scored& s) const {
  // The model's own distribution: no bias, penalties, mask or temperature.
  ScoredTokens out;
  out.seq_id = s.seq_id;
  out.first_position = s.first_position;
  const int32_t vocab = vocab_size();
  SamplingParams raw;
  raw.temperature = 0.0f;
  raw.logprobs = s.top_n;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const float* logits = logits_.data() + (s.first_row + i) * static_cast<size_t>(vocab);
    if (const int bad = count_non_finite(logits, vocab); bad > 0) {
      out.rows.clear();
      out.error = non_finite_message(bad, vocab, s.first_position + static_cast<int>(i));
      return out;
    }
    // Greedy sampling reports the argmax and the top list; the scored token's own logprob is
    // the same log-softmax, read at its id.
    const int32_t token = s.tokens[i];
    SampleResult sr = engine::sample(logits, vocab, raw, SamplerState{}, 0, 0, nullptr);
    // log-sum-exp from the argmax's logprob: logprob(t) = logit(t) - lse for every t.
    const double lse = static_cast<double>(logits[sr.token]) - sr.logprob;
    SampledRow& r = out.rows.emplace_back();
    r.token = token;
    r.logprob = static_cast<float>(logits[token] - lse);
    r.top_logprobs = std::move(sr.top_logprobs);
  }
  return out;
}

}  // namespace deepinfer::engine
