// The V4-family batch checks (deepseek_v4_batch_check.h).
#include "deepinfer/model/deepseek_v4_batch_check.h"

#include <algorithm>

#include "deepinfer/kernels/cpu/embedding.h"  // check_token_ids

namespace deepinfer::model {

Status v4_check_hybrid_batch(const KvCacheSpec& want, int64_t vocab_size, std::string_view name,
                             const ForwardBatch& b, const KvCache& cache) {
  const int num_layers = want.num_layers;
  if (cache.spec.num_layers != num_layers || !cache.spec.hybrid() ||
      cache.spec.state_kinds.size() != want.state_kinds.size() ||
      static_cast<int>(cache.block_state.size()) != num_layers ||
      cache.block_size % want.block_size_multiple != 0 || cache.num_recent_slabs <= 0)
    return invalid_argument(
        "KV cache (layers {}, {} state kinds, block size {}, {} recent slabs) does not match "
        "{}'s state ({} layers, {} state kinds, block size a multiple of {})",
        cache.spec.num_layers, cache.spec.state_kinds.size(), cache.block_size,
        cache.num_recent_slabs, name, num_layers, want.state_kinds.size(),
        want.block_size_multiple);
  DI_RETURN_IF_ERROR(kernels::check_token_ids(b.token_ids.data(), b.num_tokens(), vocab_size));
  if (b.recent_slab_table.size() != b.block_table.size())
    return invalid_argument("{}: the batch has {} recent slabs for {} blocks", name,
                            b.recent_slab_table.size(), b.block_table.size());
  const bool replay = !b.seq_replay_start.empty() || !b.seq_replay_end.empty();
  if (replay && (b.seq_replay_start.size() != size_t(b.num_seqs()) ||
                 b.seq_replay_end.size() != size_t(b.num_seqs())))
    return invalid_argument(
        "{}: the batch has {} replay starts and {} ends for {} "
        "sequences",
        name, b.seq_replay_start.size(), b.seq_replay_end.size(), b.num_seqs());
  // Each sequence's new tokens must continue its cached prefix (positions p0..p0+n-1, with
  // p0 + n = context length), and the recent rows they read (from p0 - recent_tokens on) must
  // still be there: the compressor and the window read earlier tokens' rows from the cache.
  for (int s = 0; s < b.num_seqs(); ++s) {
    const int32_t t0 = b.seq_token_start[s], t1 = b.seq_token_start[s + 1];
    const int64_t blocks = b.block_table_indptr[s + 1] - b.block_table_indptr[s];
    if (int64_t{b.seq_context_len[s]} > blocks * cache.block_size)
      return invalid_argument("{}: sequence {} has {} tokens but {} blocks", name, s,
                              b.seq_context_len[s], blocks);
    for (int32_t t = t0; t < t1; ++t)
      if (b.positions[t] != b.seq_context_len[s] - (t1 - t))
        return invalid_argument(
            "{}: sequence {}'s new tokens are not the continuation of its cache", name, s);
    int64_t first_read =
        std::max<int64_t>(0, b.seq_context_len[s] - (t1 - t0) - want.recent_tokens);
    if (replay) {
      // A replay rebuilds at least the recent_tokens rows before its end (all a later token
      // reads), and starts before the tokens it replays.
      const int32_t r0 = b.seq_replay_start[s], r1 = b.seq_replay_end[s];
      if (r0 < 0 || r0 > r1 || r0 > std::max(0, r1 - want.recent_tokens) ||
          (r0 < r1 && r0 > b.seq_context_len[s] - (t1 - t0)))
        return invalid_argument(
            "{}: sequence {}'s replay [{}, {}) does not rebuild its "
            "last {} recent rows from the step's first token",
            name, s, r0, r1, want.recent_tokens);
      first_read = std::max<int64_t>(first_read, r0);
    }
    for (int64_t j = first_read / cache.block_size; j < blocks; ++j) {
      const int32_t slab = b.recent_slab_table[b.block_table_indptr[s] + j];
      if (slab < 0 || slab >= cache.num_recent_slabs)
        return invalid_argument(
            "{}: sequence {}'s block {} has no recent rows (slab {}) but is read", name, s, j,
            slab);
    }
  }
  return Status::ok();
}

}  // namespace deepinfer::model
