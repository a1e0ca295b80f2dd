// What one forward step computes: the new tokens of several sequences, flattened, plus each
// sequence's paged KV block table. Built by the engine's runner, consumed by a model's
// forward(). Plain data, no engine types (STYLE.md: block metadata apart from block storage).
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

struct ForwardBatch {
  std::vector<int32_t> token_ids;        // [n_tokens] new tokens of all sequences, concatenated
  std::vector<int32_t> positions;        // [n_tokens] absolute position of each new token
  std::vector<int32_t> seq_token_start;  // [n_seqs + 1] sequence s owns tokens [start[s], start[s+1])
  std::vector<int32_t> seq_context_len;  // [n_seqs] tokens in the KV cache once this step is done
  std::vector<int32_t> block_table_indptr;  // [n_seqs + 1] sequence s: block_table[indptr[s]..]
  std::vector<int32_t> block_table;         // [total blocks] physical KV block ids, in order
  // Hybrid state only (KvCacheSpec::has_recent): [total blocks] the recent slab paired with each
  // block of block_table, -1 where the block's recent rows are gone (too far back to be read).
  std::vector<int32_t> recent_slab_table;
  // Hybrid state only, [n_seqs] each or empty (= 0): a bounded replay (DeepSeek-V4's
  // swa_restore "bounded"). Sequence s's tokens at positions [replay_start, replay_end) are
  // recomputed only to rebuild its recent rows: no recent row below replay_start is read (the
  // window is cut there) and the paged entries of windows closing before replay_end, already
  // in the cache, are not rewritten.
  std::vector<int32_t> seq_replay_start;
  std::vector<int32_t> seq_replay_end;
  // Models whose spec has saving_window > 0 (DeepSeek-V4.1's decoder-side saving), [n_seqs] or
  // empty (= -1 each): sequence s's tail layers (the last layers whose only state is the window)
  // run only over its tokens at positions >= seq_tail_from[s], their window cut there (no row of
  // theirs below it is read; the rows below were never computed); -1: every layer over every
  // token. Every logits row of s must lie at or after it. Approximate, as a bounded replay is.
  std::vector<int32_t> seq_tail_from;
  // Models whose spec has token_history = k > 0 (DeepSeek-V4.1's Engram), [n_seqs * k] or empty:
  // sequence s's token ids at positions first - k .. first - 1 (first: its first new token's
  // position), -1 for positions before 0. Empty: every sequence starts at position 0.
  std::vector<int32_t> seq_token_history;
  std::vector<int32_t> slot_mapping;     // [n_tokens] KV slot of each new token: block * block_size + pos % block_size
  std::vector<int32_t> logits_rows;      // token indices (into token_ids) whose logits are wanted
  // Multimodal prompts: rows whose input embedding is given (image tokens) instead of looked up
  // from token_ids; row embed_rows[i] takes embeds[i * hidden, (i + 1) * hidden).
  std::vector<int32_t> embed_rows;  // [n_embed] indices into token_ids
  std::vector<float> embeds;        // [n_embed * hidden_size]

  int num_seqs() const { return static_cast<int>(seq_context_len.size()); }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

}  // namespace deepinfer
