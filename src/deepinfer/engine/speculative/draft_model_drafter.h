// The draft-model drafter: a second (smaller, or the same) model that shares the target's
// tokenizer proposes k tokens greedily per sequence. It keeps its own paged KV per sequence:
// each call it catches up on the tokens it has not seen (the prompt, the accepted drafts, the
// target's own token) and rolls its KV back to the longest prefix it still agrees with, where
// the target rejected drafts. The forwards are batched over the step's sequences: one for the
// catch-up, then one per further draft position.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/engine/speculative/drafter.h"
#include "deepinfer/model/model.h"

namespace deepinfer::engine::speculative {

struct SpeculativeConfig;

struct DraftModelOptions {
  int block_size = 16;
  int num_blocks = 0;             // the draft model's own KV pool
  DType kv_dtype = DType::kF32;
  bool batch_invariant = false;   // model::ForwardContext
  bool int8_activations = false;
  int max_batch_tokens = 512;     // most catch-up tokens per forward (prompts are chunked)
  std::vector<int32_t> end_tokens;  // a draft stops after one of these (EOS)
};

// `pool`: the compute threads (the target runner's; drafting and verification never overlap).
std::unique_ptr<Drafter> make_draft_model_drafter(std::shared_ptr<model::Model> model, ThreadPool* pool,
                                                  const DraftModelOptions& options);

// What the engine knows when it builds the drafter for method "draft".
struct DraftTarget {
  const model::ModelConfig* config = nullptr;  // the target's
  ThreadPool* pool = nullptr;
  int block_size = 16;
  int num_kv_blocks = 0;  // the target's pool
  int max_num_seqs = 1;
  bool batch_invariant = false;
  bool int8_activations = false;
  std::string kv_cache_dtype = "auto";
  std::vector<int32_t> end_tokens;
};

// Checks the draft weights against the target (vocabulary size, state that can be rolled back)
// and sizes its KV pool (SpeculativeConfig::draft_kv_cache_bytes). Errors name --draft-model.
Result<std::unique_ptr<Drafter>> make_configured_draft_model_drafter(const SpeculativeConfig& config,
                                                                     const DraftTarget& target);

}  // namespace deepinfer::engine::speculative
