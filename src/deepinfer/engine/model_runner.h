// Executes one scheduled step on one device (today: the CPU and its thread pool): builds the
// batch, runs the forward, processes the logits (grammar masks, bias, penalties), samples and
// reports logprobs. It owns the model, the KV storage and the compute threads; it never sees
// the scheduler, the requests or grammar matchers, only the plain values of runner_io.h.
//
// A step is two calls, as vLLM v1's execute_model / sample_tokens: execute() starts the
// forward and sample() draws from its logits. In between (while the forward runs, with
// overlap scheduling) the engine prepares the SamplingInput: grammar masks, token histories.
// Speculative decoding: a RunnerSeq's drafts give it num_draft + 1 logits rows, which sample()
// verifies (speculative/verify.h) into accepted drafts and one more token. Later: an expert-parallel rank group or a CUDA device is another runner behind the same calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/engine/runner_io.h"
#include "deepinfer/model/model.h"

namespace deepinfer::engine {

struct ModelRunnerConfig {
  int num_threads = 0;  // 0 = one per core
  int block_size = 16;
  int num_kv_blocks = 16;
  int num_recent_slabs = 0;  // hybrid caches (model::KvCacheSpec::has_recent)
  bool batch_invariant = false;
  bool int8_activations = false;  // see model::ForwardContext
  DType kv_dtype = DType::kF32;   // the K/V pools' elements (model::KvCacheSpec::dtype)
};

class ModelRunner {
 public:
  ModelRunner(std::unique_ptr<model::Model> model, const ModelRunnerConfig& config);
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Builds the batch and runs the forward. Every Sequence::kPendingToken in `in` must have been
  // filled in. The logits of the sampling rows wait for sample(); a failed forward leaves none.
  Status execute(const RunnerInput& in);
  // Samples the rows of the last execute(), in order (rows.size() == its num_sampling()).
  // A row whose logits hold NaN or infinity gets an error and no token; other rows are unharmed.
  RunnerOutput sample(const SamplingInput& in);

  const model::ModelConfig& model_config() const { return model_->config(); }
  model::Model& model() { return *model_; }
  const model::Model& model() const { return *model_; }
  // The KV blocks the forwards read and write (a KV store tier copies blocks in and out).
  model::KvCache& kv_cache() { return kv_; }
  int num_threads() const { return pool_->num_threads(); }
  // The compute threads (a draft model's forwards run on them too, between steps).
  ThreadPool* pool() { return pool_.get(); }
  int32_t vocab_size() const { return static_cast<int32_t>(model_->config().vocab_size); }

 private:
  ModelRunnerConfig config_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  model::KvCache kv_;
  struct Scored {  // a sequence's scored positions in logits_
    int64_t seq_id = 0;
    int first_position = 0;
    size_t first_row = 0;
    std::vector<int32_t> tokens;
    int top_n = 0;
  };
  ScoredTokens score(const Scored& s) const;

  std::vector<float> logits_;         // [logits rows * vocab] of the last execute()
  std::vector<size_t> sample_row_;    // [num_rows_] the (first) logits row of each sampling row
  std::vector<int> sample_drafts_;    // [num_rows_] drafts after it (each with its own logits row)
  std::vector<int32_t> row_position_; // [num_rows_] position of each row's token (messages)
  std::vector<Scored> scored_;        // sequences with scored positions
  int num_rows_ = 0;
};

}  // namespace deepinfer::engine
