// The CPU model runner: one forward per step on the thread pool, then sampling row by row.
#include "deepinfer/engine/model_runner.h"

#include <cmath>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/batch_builder.h"

namespace deepinfer::engine {
namespace {

int count_non_finite(const float* row, int32_t vocab) {
  int n = 0;
  for (int32_t i = 0; i < vocab; ++i) n += std::isfinite(row[i]) ? 0 : 1;
  return n;
}

}  // namespace

ModelRunner::ModelRunner(std::unique_ptr<model::Model> model, const ModelRunnerConfig& config)
    : config_(config), model_(std::move(model)), pool_(std::make_unique<ThreadPool>(config.num_threads)) {
  kv_ = model::KvCache::allocate(model_->kv_cache_spec(), config.num_kv_blocks, config.block_size);
}

Status ModelRunner::execute(const RunnerInput& in) {
  num_rows_ = 0;
  BatchInputs b = build_forward_batch(in, config_.block_size);
  DI_CHECK(b.pending_token_index.empty(), "a batch runs with {} tokens not sampled yet",
           b.pending_token_index.size());
  b.batch.slot_mapping = std::move(b.slot_mapping);
  const int64_t vocab = model_->config().vocab_size;
  logits_.resize(b.batch.logits_rows.size() * static_cast<size_t>(vocab));
  model::ForwardContext ctx{pool_.get(), config_.batch_invariant, config_.int8_activations};
  DI_RETURN_IF_ERROR(model_->forward(b.batch, kv_, ctx, logits_.data()));
  row_position_.clear();
  for (int32_t r : b.batch.logits_rows) row_position_.push_back(b.batch.positions[static_cast<size_t>(r)]);
  num_rows_ = static_cast<int>(b.batch.logits_rows.size());
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
    const float* logits = logits_.data() + i * static_cast<size_t>(vocab);
    if (const int bad = count_non_finite(logits, vocab); bad > 0) {
      res.error = fmt::format(
          "the model produced non-finite logits ({} of {} values are NaN or infinite) for the token "
          "after position {}: the weights or the computation are broken",
          bad, vocab, row_position_[i]);
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
  num_rows_ = 0;
  return out;
}

}  // namespace deepinfer::engine
