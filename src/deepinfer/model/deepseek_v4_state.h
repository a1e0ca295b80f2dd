// DeepSeek-V4's per-sequence state in the engine's hybrid paged cache (kv_cache.h):
// - recent rows, one per (layer, token), kept only while within recent_tokens of the end:
//     kv          [head_dim]        the shared K=V vector (the sliding window reads these)
//     comp_kv/score [cw] each       the compressor's projections of this token (cw = 2*head_dim
//                                   for CSA's overlapping Ca|Cb, head_dim for HCA), score with ape
//     idx_kv/score  [2*index_dim]   the indexer compressor's projections (CSA)
//   They are the window ring and the compressors' unfinished-window tails: a token reads the
//   window's last sliding_window rows, and a compressed entry is pooled from the rows of its
//   window (and the previous one for CSA) when the window's last token arrives.
// - paged entries in the blocks, kept for the whole sequence: the compressed entry w [head_dim]
//   and (CSA) the indexer key w [index_dim], both in the block holding token w * ratio, at slot
//   (w * ratio % block_size) / ratio. The block size is a multiple of every ratio.
// Every row and entry depends only on tokens <= its position, so paging, chunked prefill (a
// boundary anywhere, also inside a compression window), prefix-cache hits, preemption by
// recompute and batching need nothing from the model beyond the block and slab tables.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "deepinfer/model/deepseek_v4_config.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::model {

struct V4StateLayout {
  // Offsets in a recent row (floats per token); -1: the layer has no such field.
  int64_t kv = 0;
  int64_t comp_kv = -1, comp_score = -1;
  int64_t idx_kv = -1, idx_score = -1;
  int64_t recent_floats = 0;
  // Offsets in the layer's part of a block: entries [block_size / ratio, head_dim], then
  // indexer keys [block_size / ratio, index_head_dim].
  int64_t comp_entries = -1, idx_entries = -1;
  int64_t block_floats = 0;
};

inline V4StateLayout v4_state_layout(const DeepseekV4Config& c, int layer, int block_size) {
  V4StateLayout s;
  const V4Layer& L = c.layers[layer];
  int64_t at = c.head_dim;
  if (L.attn != V4Attn::kWindow) {
    const int64_t cw = L.attn == V4Attn::kCsa ? 2 * c.head_dim : c.head_dim;
    s.comp_kv = at;
    s.comp_score = at + cw;
    at += 2 * cw;
    s.comp_entries = 0;
    s.block_floats = int64_t{block_size / L.ratio} * c.head_dim;
  }
  if (L.attn == V4Attn::kCsa) {
    const int64_t iw = 2 * c.index_head_dim;
    s.idx_kv = at;
    s.idx_score = at + iw;
    at += 2 * iw;
    s.idx_entries = s.block_floats;
    s.block_floats += int64_t{block_size / L.ratio} * c.index_head_dim;
  }
  s.recent_floats = at;
  return s;
}

// How far back a new token reads recent rows: the window, and a compressor window (two for
// CSA's overlap) closing at the token.
inline int v4_recent_tokens(const DeepseekV4Config& c) {
  int r = c.sliding_window;
  for (const V4Layer& L : c.layers)
    if (L.attn != V4Attn::kWindow) r = std::max(r, L.attn == V4Attn::kCsa ? 2 * L.ratio : L.ratio);
  return r;
}

// The block size must hold whole compression windows of every ratio.
inline int v4_block_size_multiple(const DeepseekV4Config& c) {
  int m = 1;
  for (const V4Layer& L : c.layers)
    if (L.attn != V4Attn::kWindow) m = std::lcm(m, L.ratio);
  return m;
}

// The state kinds the engine allocates (kv_cache.h), in the layout's order.
inline KvCacheSpec v4_kv_cache_spec(const DeepseekV4Config& c) {
  KvCacheSpec spec;
  spec.num_layers = c.num_layers;
  for (int l = 0; l < c.num_layers; ++l) {
    const V4Layer& L = c.layers[l];
    const int64_t cw = L.attn == V4Attn::kCsa ? 2 * c.head_dim : c.head_dim;
    spec.state_kinds.push_back({"window_kv", l, c.head_dim, 1, true});
    if (L.attn != V4Attn::kWindow)
      spec.state_kinds.push_back({"compressor_tail", l, 2 * cw, 1, true});
    if (L.attn == V4Attn::kCsa)
      spec.state_kinds.push_back({"indexer_tail", l, 4 * int64_t{c.index_head_dim}, 1, true});
    if (L.attn != V4Attn::kWindow)
      spec.state_kinds.push_back({"compressed_entries", l, c.head_dim, L.ratio, false});
    if (L.attn == V4Attn::kCsa)
      spec.state_kinds.push_back({"indexer_keys", l, c.index_head_dim, L.ratio, false});
  }
  spec.recent_tokens = v4_recent_tokens(c);
  spec.block_size_multiple = v4_block_size_multiple(c);
  return spec;
}

// One sequence's view of a layer's state: its block and recent-slab tables and the layer's pools.
struct V4SeqState {
  float* block_pool = nullptr;   // the layer's block state [num_blocks, block_floats]
  float* recent_pool = nullptr;  // the layer's recent rows [num_slabs * block_size, recent_floats]
  const int32_t* blocks = nullptr;
  const int32_t* slabs = nullptr;  // parallel to blocks; -1 where the rows are gone
  int64_t n_blocks = 0;
  int block_size = 0;
  int64_t block_floats = 0;
  int64_t recent_floats = 0;
  // A bounded replay (ForwardBatch::seq_replay_start/end): rows below window_floor are not
  // there; entries of windows closing before entries_from are kept as cached.
  int64_t window_floor = 0;
  int64_t entries_from = 0;
  // The recent row of token `pos` (within recent_tokens of the sequence's end).
  float* row(int64_t pos) const {
    const int64_t slab = slabs[pos / block_size];
    return recent_pool + (slab * block_size + pos % block_size) * recent_floats;
  }
  // Entry `e` of a paged kind at `offset` in the block, `floats` wide, one per `ratio` tokens.
  float* entry(int64_t offset, int64_t floats, int ratio, int64_t e) const {
    const int64_t t = e * ratio;
    return block_pool + int64_t{blocks[t / block_size]} * block_floats + offset +
           (t % block_size) / ratio * floats;
  }
};

}  // namespace deepinfer::model
