// Where DeepSeek-V4's per-sequence state lives: one f32 row per (layer, token) in the engine's
// paged KvCache (one "KV head" of max-row floats per layer, no V pool), written at the token's
// KV slot. A row holds everything that token contributes:
//   kv            [head_dim]        the shared K=V vector (the sliding window reads these)
//   comp_kv/score [cw] each         the compressor's projections of this token (cw = 2*head_dim
//                                   for CSA's overlapping Ca|Cb, head_dim for HCA), score with ape
//   comp_entry    [head_dim]        the compressed entry w = pos / r, at the row of the window's
//                                   last token (pos % r == r - 1) only
//   idx_kv/score  [2*index_dim]     the indexer compressor's projections (CSA)
//   idx_entry     [index_dim]       the indexer key of entry w (CSA), same rule as comp_entry
// Every row depends only on tokens <= its position, so paging, chunked prefill (a boundary
// anywhere, also inside a compression window), prefix-cache hits on whole blocks, preemption by
// recompute and batching need nothing from the model beyond the block table.
// Cost: every token keeps its window K/V and compressor projections, not just the last 128 and
// the unfinished window's tail; the hybrid paged state of issue 21 item 2 (window ring +
// compressed pages + tails, per layer kind) is the next step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4_config.h"

namespace deepinfer::model {

struct V4RowLayout {
  int64_t kv = 0;
  int64_t comp_kv = -1, comp_score = -1, comp_entry = -1;  // -1: window-only layer
  int64_t idx_kv = -1, idx_score = -1, idx_entry = -1;     // -1: not a CSA layer
  int64_t floats = 0;                                      // used by this layer
};

inline V4RowLayout v4_row_layout(const DeepseekV4Config& c, int layer) {
  V4RowLayout r;
  const V4Layer& L = c.layers[layer];
  int64_t at = c.head_dim;
  if (L.attn != V4Attn::kWindow) {
    const int64_t cw = L.attn == V4Attn::kCsa ? 2 * c.head_dim : c.head_dim;
    r.comp_kv = at;
    r.comp_score = at + cw;
    r.comp_entry = at + 2 * cw;
    at += 2 * cw + c.head_dim;
  }
  if (L.attn == V4Attn::kCsa) {
    const int64_t iw = 2 * c.index_head_dim;
    r.idx_kv = at;
    r.idx_score = at + iw;
    r.idx_entry = at + 2 * iw;
    at += 2 * iw + c.index_head_dim;
  }
  r.floats = at;
  return r;
}

// Floats per (layer, token) row: the largest layer's need.
inline int64_t v4_row_floats(const DeepseekV4Config& c) {
  int64_t m = 0;
  for (int l = 0; l < c.num_layers; ++l) m = std::max(m, v4_row_layout(c, l).floats);
  return m;
}

// One sequence's view of a layer's paged rows.
struct V4SeqRows {
  float* pool = nullptr;            // the layer's pool [num_blocks * block_size, row]
  const int32_t* blocks = nullptr;  // the sequence's block table
  int64_t n_blocks = 0;
  int block_size = 0;
  int64_t row = 0;  // floats per row
  float* at(int64_t pos) const {
    return pool + (int64_t{blocks[pos / block_size]} * block_size + pos % block_size) * row;
  }
};

}  // namespace deepinfer::model
