// DeepSeek-V4.1's per-sequence state in the engine's hybrid paged cache (kv_cache.h), declared as
// V4 declares its own (deepseek_v4_state.h), with V4.1's sharing:
// - recent rows, one per (layer, token), kept only while within recent_tokens of the end:
//     kv          [head_dim]     every layer: the window ring (V4.1 has a window on every layer)
//     comp_kv/score [head_dim] each   KV sources only: the compressor's projections of this token
//                                (score unused at ratio 1; at ratio 2 the pending pair's scores)
// - paged entries in the blocks, kept for the whole sequence, at KV sources only (the layers that
//   read a source use its entries): the compressed entry w [head_dim] and, when the source is
//   also an index source, the index key w [index_head_dim], in the block holding token
//   w * ratio, at slot (w * ratio % block_size) / ratio.
// Engram keeps no state (its token history comes with the batch). Every row and entry depends
// only on tokens <= its position, as in V4, so paging, chunked prefill and prefix hits need only
// the block and slab tables. Not yet read by a forward: the layout the V4.1 attention will use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v4_state.h"
#include "deepinfer/model/kv_cache.h"

namespace deepinfer::model {

// A layer's offsets: V4's layout struct (idx_kv / idx_score stay -1: V4.1's index keys come from
// the compressed entry, not from a second compressor).
inline V4StateLayout v41_state_layout(const DeepseekV41Config& c, int layer, int block_size) {
  V4StateLayout s;
  const V41Layer& L = c.layers[layer];
  s.recent_floats = c.head_dim;
  if (!L.owns_compressor) return s;
  s.comp_kv = c.head_dim;
  s.comp_score = 2 * int64_t{c.head_dim};
  s.recent_floats = 3 * int64_t{c.head_dim};
  s.comp_entries = 0;
  s.block_floats = int64_t{block_size / L.ratio} * c.head_dim;
  if (L.runs_indexer) {
    s.idx_entries = s.block_floats;
    s.block_floats += int64_t{block_size / L.ratio} * c.index_head_dim;
  }
  return s;
}

// How far back a new token reads recent rows: the window, and a source's compression window.
inline int v41_recent_tokens(const DeepseekV41Config& c) {
  int r = c.sliding_window;
  for (const V41Layer& L : c.layers)
    if (L.owns_compressor) r = std::max(r, L.ratio);
  return r;
}

// Decoder-side saving: the first of the layers that may run only over the last sliding_window
// tokens of a span (num_layers: none). A layer qualifies when its only private state is its
// window (it owns no compressor, so no compressed entries and no index keys: an index source
// reading another layer's keys keeps none, its top-k lives for one forward) and every later
// layer qualifies too (else a later compressor would need its output at every position). The
// V4.1-Flash layout: 21 (layer 20's ratio-1 compressor is the last owner of global state).
inline int v41_first_tail_layer(const DeepseekV41Config& c) {
  int first = c.num_layers;
  while (first > 0 && !c.layers[first - 1].owns_compressor) --first;
  return first;
}

// The block size must hold whole compression windows of every source's ratio.
inline int v41_block_size_multiple(const DeepseekV41Config& c) {
  int m = 1;
  for (const V41Layer& L : c.layers)
    if (L.owns_compressor) m = std::lcm(m, L.ratio);
  return m;
}

// The state kinds the engine allocates (kv_cache.h), in the layout's order.
inline KvCacheSpec v41_kv_cache_spec(const DeepseekV41Config& c) {
  KvCacheSpec spec;
  spec.num_layers = c.num_layers;
  for (int l = 0; l < c.num_layers; ++l) {
    const V41Layer& L = c.layers[l];
    spec.state_kinds.push_back({"window_kv", l, c.head_dim, 1, true});
    if (!L.owns_compressor) continue;
    spec.state_kinds.push_back({"compressor_tail", l, 2 * int64_t{c.head_dim}, 1, true});
    spec.state_kinds.push_back({"compressed_entries", l, c.head_dim, L.ratio, false});
    if (L.runs_indexer)
      spec.state_kinds.push_back({"indexer_keys", l, c.index_head_dim, L.ratio, false});
  }
  spec.recent_tokens = v41_recent_tokens(c);
  spec.block_size_multiple = v41_block_size_multiple(c);
  if (v41_first_tail_layer(c) < c.num_layers) spec.saving_window = c.sliding_window;
  return spec;
}

}  // namespace deepinfer::model
