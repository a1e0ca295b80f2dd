// Flattening is in ScheduleOutput order, so logits rows (one per sampling sequence) come out
// in the order StepOutput::sampled expects.
#include "deepinfer/engine/batch_builder.h"

#include "deepinfer/base/check.h"

namespace deepinfer::engine {

BatchInputs build_forward_batch(const ScheduleOutput& out, const SequenceLookup& lookup,
                                int block_size) {
  BatchInputs in;
  ForwardBatch& b = in.batch;
  b.token_ids.reserve(out.total_tokens);
  b.positions.reserve(out.total_tokens);
  in.slot_mapping.reserve(out.total_tokens);
  b.seq_token_start.push_back(0);
  b.block_table_indptr.push_back(0);
  for (const ScheduledSeq& s : out.seqs) {
    const Sequence* seq = lookup(s.seq_id);
    DI_CHECK(seq != nullptr, "scheduled seq {} not found", s.seq_id);
    const int end = s.first_position + s.num_new_tokens;
    DI_CHECK(end <= seq->num_tokens() && s.num_new_tokens > 0,
             "seq {}: tokens [{}, {}) of {}", seq->id, s.first_position, end, seq->num_tokens());
    const int num_blocks = (end + block_size - 1) / block_size;
    DI_CHECK(num_blocks <= static_cast<int>(seq->block_table.size()),
             "seq {}: {} tokens need {} blocks, table has {}", seq->id, end, num_blocks,
             seq->block_table.size());
    for (int pos = s.first_position; pos < end; ++pos) {
      const int32_t token = seq->token_at(pos);
      if (token == Sequence::kPendingToken) {
        in.pending_token_index.push_back(static_cast<int32_t>(b.token_ids.size()));
        in.pending_seq_id.push_back(seq->id);
      }
      b.token_ids.push_back(token);
      b.positions.push_back(pos);
      in.slot_mapping.push_back(seq->block_table[pos / block_size] * block_size + pos % block_size);
    }
    b.seq_token_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seq_context_len.push_back(end);
    b.block_table.insert(b.block_table.end(), seq->block_table.begin(),
                         seq->block_table.begin() + num_blocks);
    b.block_table_indptr.push_back(static_cast<int32_t>(b.block_table.size()));
    if (s.samples) b.logits_rows.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
  }
  return in;
}

}  // namespace deepinfer::engine
