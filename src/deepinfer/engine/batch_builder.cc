// Flattening is in ScheduleOutput order, so logits rows (one per sampling sequence) come out
// in the order StepOutput::sampled expects; a sequence's scored positions (prompt logprobs)
// come just before its sampling row.
#include "deepinfer/engine/batch_builder.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::engine {
namespace {

// The rows of images that fall in this chunk get their embeddings; their token ids (the
// image_key_token ids the prefix cache hashes) become 0, any in-vocabulary id, as the model
// reads the embedding instead.
void add_image_rows(const std::vector<PromptImage>& images, int first, RunnerSeq& r) {
  const int end = first + r.num_new_tokens();
  for (const PromptImage& img : images) {
    const int lo = std::max(first, img.start), hi = std::min(end, img.start + img.length);
    if (lo >= hi) continue;
    const size_t hidden = img.embeddings->size() / static_cast<size_t>(img.length);
    for (int pos = lo; pos < hi; ++pos) {
      r.embed_rows.push_back(pos - first);
      r.token_ids[static_cast<size_t>(pos - first)] = 0;
      const float* row = img.embeddings->data() + static_cast<size_t>(pos - img.start) * hidden;
      r.embeds.insert(r.embeds.end(), row, row + hidden);
    }
  }
}

}  // namespace

RunnerInput make_runner_input(const ScheduleOutput& out, const SequenceLookup& lookup, int block_size,
                              std::span<const int32_t> slab_of_block, int token_history) {
  RunnerInput in;
  in.seqs.reserve(out.seqs.size());
  for (const ScheduledSeq& s : out.seqs) {
    const Sequence* seq = lookup(s.seq_id);
    DI_CHECK(seq != nullptr, "scheduled seq {} not found", s.seq_id);
    const int end = s.first_position + s.num_new_tokens;
    const int num_draft = static_cast<int>(s.draft_tokens.size());
    DI_CHECK(end - num_draft <= seq->num_tokens() && s.num_new_tokens > num_draft,
             "seq {}: tokens [{}, {}) of {}", seq->id, s.first_position, end, seq->num_tokens());
    const int num_blocks = (end + block_size - 1) / block_size;
    DI_CHECK(num_blocks <= static_cast<int>(seq->block_table.size()),
             "seq {}: {} tokens need {} blocks, table has {}", seq->id, end, num_blocks,
             seq->block_table.size());
    RunnerSeq& r = in.seqs.emplace_back();
    r.seq_id = s.seq_id;
    r.first_position = s.first_position;
    r.samples = s.samples;
    r.num_draft = num_draft;
    r.token_ids.reserve(static_cast<size_t>(s.num_new_tokens));
    for (int pos = s.first_position; pos < end - num_draft; ++pos) r.token_ids.push_back(seq->token_at(pos));
    r.token_ids.insert(r.token_ids.end(), s.draft_tokens.begin(), s.draft_tokens.end());
    if (seq->images) add_image_rows(*seq->images, s.first_position, r);
    r.block_table.assign(seq->block_table.begin(), seq->block_table.begin() + num_blocks);
    if (!slab_of_block.empty())
      for (int32_t b : r.block_table) r.recent_slabs.push_back(slab_of_block[static_cast<size_t>(b)]);
    r.replay_start = seq->replay_start;
    r.replay_end = seq->replay_end;
    if (s.first_position < seq->tail_end) r.tail_from = seq->tail_from;
    for (int pos = s.first_position - token_history; pos < s.first_position; ++pos) {
      const int32_t id = pos < 0 ? -1 : seq->token_at(pos);
      DI_CHECK(pos < 0 || id != Sequence::kPendingToken, "seq {}: token {} before the step is not sampled yet",
               seq->id, pos);
      r.token_history.push_back(id);
    }
  }
  return in;
}

BatchInputs build_forward_batch(const RunnerInput& in, int block_size) {
  BatchInputs out;
  ForwardBatch& b = out.batch;
  size_t total = 0;
  bool any_tail = false;  // decoder-side saving: seq_tail_from for every sequence, or empty
  for (const RunnerSeq& s : in.seqs) {
    total += s.token_ids.size();
    any_tail = any_tail || s.tail_from >= 0;
  }
  b.token_ids.reserve(total);
  b.positions.reserve(total);
  out.slot_mapping.reserve(total);
  b.seq_token_start.push_back(0);
  b.block_table_indptr.push_back(0);
  for (const RunnerSeq& s : in.seqs) {
    const int end = s.first_position + s.num_new_tokens();
    DI_CHECK(s.num_new_tokens() > 0 && (end + block_size - 1) / block_size <= static_cast<int>(s.block_table.size()),
             "seq {}: tokens [{}, {}) with {} blocks", s.seq_id, s.first_position, end, s.block_table.size());
    for (int i = 0; i < s.num_new_tokens(); ++i) {
      const int pos = s.first_position + i;
      const int32_t token = s.token_ids[static_cast<size_t>(i)];
      if (token == Sequence::kPendingToken) {
        out.pending_token_index.push_back(static_cast<int32_t>(b.token_ids.size()));
        out.pending_seq_id.push_back(s.seq_id);
      }
      b.token_ids.push_back(token);
      b.positions.push_back(pos);
      out.slot_mapping.push_back(s.block_table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size);
    }
    b.seq_token_start.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seq_context_len.push_back(end);
    b.block_table.insert(b.block_table.end(), s.block_table.begin(), s.block_table.end());
    DI_CHECK(s.recent_slabs.empty() || s.recent_slabs.size() == s.block_table.size(),
             "seq {}: {} recent slabs for {} blocks", s.seq_id, s.recent_slabs.size(), s.block_table.size());
    b.recent_slab_table.insert(b.recent_slab_table.end(), s.recent_slabs.begin(), s.recent_slabs.end());
    b.block_table_indptr.push_back(static_cast<int32_t>(b.block_table.size()));
    DI_CHECK(s.token_history.size() == in.seqs.front().token_history.size(),
             "seq {}: {} history ids, the batch's first sequence {}", s.seq_id, s.token_history.size(),
             in.seqs.front().token_history.size());
    b.seq_token_history.insert(b.seq_token_history.end(), s.token_history.begin(), s.token_history.end());
    if (any_tail) b.seq_tail_from.push_back(s.tail_from);
    if (!s.recent_slabs.empty()) {
      b.seq_replay_start.push_back(s.replay_start);
      b.seq_replay_end.push_back(s.replay_end);
    }
    const int num_sample_rows = s.samples ? s.num_draft + 1 : 0;
    DI_CHECK(s.num_draft >= 0 && (s.samples || s.num_draft == 0) &&
                 static_cast<int>(s.score_tokens.size()) <= s.num_new_tokens() - num_sample_rows,
             "seq {}: {} scored tokens and {} drafts in a chunk of {}", s.seq_id, s.score_tokens.size(),
             s.num_draft, s.num_new_tokens());
    const int32_t seq_start = b.seq_token_start[b.seq_token_start.size() - 2];
    for (size_t i = 0; i < s.score_tokens.size(); ++i) b.logits_rows.push_back(seq_start + static_cast<int32_t>(i));
    // Speculative decoding: the last known token's row, then one per draft (the bonus last).
    const int32_t seq_end = static_cast<int32_t>(b.token_ids.size());
    for (int i = num_sample_rows; i > 0; --i) b.logits_rows.push_back(seq_end - i);
    for (int32_t row : s.embed_rows) b.embed_rows.push_back(seq_start + row);
    b.embeds.insert(b.embeds.end(), s.embeds.begin(), s.embeds.end());
  }
  return out;
}

BatchInputs build_forward_batch(const ScheduleOutput& out, const SequenceLookup& lookup,
                                int block_size) {
  return build_forward_batch(make_runner_input(out, lookup, block_size), block_size);
}

}  // namespace deepinfer::engine
