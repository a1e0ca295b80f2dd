// Turns a ScheduleOutput into the model's ForwardBatch (flattened tokens, positions, CSR block
// tables, logits rows) plus the KV slot each new token writes. Call after schedule() and
// before update(), while num_computed_tokens still equals each entry's first_position.
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
};

// Finds a live sequence by id (e.g. Scheduler::get); must not return null for scheduled ids.
using SequenceLookup = std::function<const Sequence*(int64_t)>;

BatchInputs build_forward_batch(const ScheduleOutput& out, const SequenceLookup& lookup,
                                int block_size);

}  // namespace deepinfer::engine
