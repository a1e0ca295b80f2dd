// From a schedule to the model's batch, in two stages on either side of the runner seam:
// make_runner_input (engine side: ScheduleOutput + sequences -> RunnerInput, plain data) and
// build_forward_batch (runner side: RunnerInput -> ForwardBatch with flattened tokens,
// positions, CSR block tables, logits rows and the KV slot each new token writes). Call right
// after schedule(), before any other schedule() or update().
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "deepinfer/engine/runner_io.h"
#include "deepinfer/engine/schedule_output.h"
#include "deepinfer/engine/sequence.h"
#include "deepinfer/model/forward_batch.h"

namespace deepinfer::engine {

struct BatchInputs {
  ForwardBatch batch;
  std::vector<int32_t> slot_mapping;  // [n_tokens] block_id * block_size + position % block_size
  // Overlap scheduling: tokens an in-flight step is still sampling (Sequence::kPendingToken in
  // batch.token_ids); they must be written in before the forward runs.
  std::vector<int32_t> pending_token_index;  // [n_pending] indices into batch.token_ids
  std::vector<int64_t> pending_seq_id;       // [n_pending] whose sample goes there
};

// Finds a live sequence by id (e.g. Scheduler::get); must not return null for scheduled ids.
using SequenceLookup = std::function<const Sequence*(int64_t)>;

// `slab_of_block` (hybrid caches: KvCacheManager::recent_slabs().slab_of_block(); empty
// otherwise) gives each RunnerSeq its recent slabs; `token_history` (the model's
// KvCacheSpec::token_history) how many ids before its first new token it carries. Those are
// always known: with overlap scheduling only the first new token can be the one in flight.
RunnerInput make_runner_input(const ScheduleOutput& out, const SequenceLookup& lookup, int block_size,
                              std::span<const int32_t> slab_of_block = {}, int token_history = 0);

BatchInputs build_forward_batch(const RunnerInput& in, int block_size);

// Both stages at once (tests and tools that have a scheduler at hand).
BatchInputs build_forward_batch(const ScheduleOutput& out, const SequenceLookup& lookup,
                                int block_size);

}  // namespace deepinfer::engine
