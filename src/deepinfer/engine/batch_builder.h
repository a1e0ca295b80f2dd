// Turns a ScheduleOutput into the model's ForwardBatch (flattened tokens, positions, CSR block
// tables, logits rows) plus the KV slot each new token writes. Call right after schedule(),
// before any other schedule() or update().
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "deepinfer/engine/schedule_output.h"
#include "deepinfer/engine/sequence.h"
#include "deepinfer/model/forward_batch.h"

namespace deepinfer::engine {

struct BatchInputs {
  ForwardBatch batch;
  std::vector<int32_t> slot_mapping;  // [n_tokens] block_id * block_size + position % block_size
  // Overlap scheduling: tokens an in-flight step is still sampling (Sequence::kPendingToken in
  // batch.token_ids); the engine writes them in before the forward runs.
  std::vector<int32_t> pending_token_index;  // [n_pending] indices into batch.token_ids
  std::vector<int64_t> pending_seq_id;       // [n_pending] whose sample goes there
};

// Finds a live sequence by id (e.g. Scheduler::get); must not return null for scheduled ids.
using SequenceLookup = std::function<const Sequence*(int64_t)>;

BatchInputs build_forward_batch(const ScheduleOutput& out, const SequenceLookup& lookup,
                                int block_size);

}  // namespace deepinfer::engine
