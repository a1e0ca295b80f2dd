// DeepSeek-V4's KV compressor (one entry per `ratio` tokens) as used by CSA/HCA attention and
// by the Lightning indexer: per token, project kv and score (+ ape[pos % ratio]) into its state
// recent row; at each window's last token, pool the window into one paged entry (softmax over slots
// per channel; CSA overlaps: Ca of window w-1 and Cb of window w), RMS-norm it and rotate its
// trailing rope channels at position w * ratio.
#pragma once

#include <cstdint>

#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/deepseek_v4_state.h"
#include "deepinfer/model/deepseek_v4_weights.h"

namespace deepinfer::model {

struct V4CompressorDims {
  int64_t dim = 0;  // entry size (head_dim, or index_head_dim)
  int ratio = 0;
  bool overlap = false;  // CSA: projections are 2 * dim wide
  int rope_dim = 0;
  float theta = 0;
  kernels::RopeScaling scaling;
  float eps = 1e-6f;
  // Offsets of this compressor's fields: kv and score in a recent row, entries in a block.
  int64_t kv_off = 0, score_off = 0, entry_off = 0;
  int64_t width() const { return overlap ? 2 * dim : dim; }
};

// Entry w of a sequence from its recent rows (all tokens of windows w-1 (CSA) and w already
// written): pooled and normed, not rotated (V4.1's index keys are made from it), into `entry`.
void v4_pool_entry(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                   int64_t entry_index, float* entry);
// Rotates entry w's trailing rope_dim channels at its position w * ratio.
void v4_rotate_entry(const V4CompressorDims& d, int64_t entry_index, float* entry);
// v4_pool_entry then v4_rotate_entry.
void v4_compress_entry(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                       int64_t entry_index, float* entry);

// Writes the projections of `n` new tokens (rows `kv` / `score` [n, width], positions `pos`)
// into their recent rows, then every entry whose window closes among them into its block
// (except those closing before st.entries_from: a bounded replay keeps the cached ones).
// Without w.ape (V4.1) the scores go in unbiased; `score` may be null when ratio is 1 and there
// is no overlap (one slot a window, weight 1: V4.1's ratio-1 compressor has no wgate).
void v4_compressor_step(const V4CompressorDims& d, const V4Compressor& w, const V4SeqState& st,
                        const float* kv, const float* score, const int32_t* pos, int64_t n);

}  // namespace deepinfer::model
