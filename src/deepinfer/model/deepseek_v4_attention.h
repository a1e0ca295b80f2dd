// DeepSeek-V4 attention block: low-rank q with per-head RMS norm, one shared K=V head, partial
// interleaved RoPE on the trailing channels; keys = the sliding window plus compressed entries
// (HCA: all finished ones; CSA: the Lightning indexer's top-k); a learned sink per head; the
// output's rope channels rotated back at the query position; grouped low-rank output
// projection. New tokens' recent rows and entries are written first (deepseek_v4_state.h), so a
// token sees the window and entries of its own chunk as well as earlier ones.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "deepinfer/model/deepseek_v4_compressor.h"
#include "deepinfer/model/deepseek_v4_config.h"
#include "deepinfer/model/deepseek_v4_state.h"
#include "deepinfer/model/deepseek_v4_weights.h"
#include "deepinfer/model/forward_batch.h"

namespace deepinfer::model {

// One query's working set (one per thread).
struct V4QueryScratch {
  std::vector<const float*> keys;
  std::vector<const float*> entry_keys;  // the indexer's visible entries
  std::vector<float> scores, isc;
  std::vector<int32_t> topk;
  double index_seconds = 0;  // indexer scoring + top-k, summed (benchmarks)
};

struct V4AttnScratch {
  std::vector<float> qr, q, kv, ckv, cscore, ikv, iscore, iq, iw, attn, grouped;
  std::vector<int32_t> neg_pos, seq_of;
  std::vector<V4QueryScratch> per_thread;
  double compress_seconds = 0;  // compressors + indexer top-k (wall), summed (benchmarks)
};

// One layer's pools in the hybrid cache (kv_cache.h) and its layout.
struct V4LayerCache {
  float* block_pool = nullptr;   // [num_blocks, layout.block_floats]
  float* recent_pool = nullptr;  // [num_recent_slabs * block_size, layout.recent_floats]
  int block_size = 0;
  V4StateLayout layout;
};

// out [T, hidden] = attention of the batch's tokens; h [T, hidden] is the normed block input.
void v4_attention_forward(const DeepseekV4Config& c, int layer, const V4Attention& w,
                          const ForwardBatch& b, const float* h, const V4LayerCache& cache,
                          V4AttnScratch& s, ForwardContext& ctx, float* out);

// Sequence s's view of a layer's pools (its block and slab tables, its replay bounds).
V4SeqState v4_seq_state(const ForwardBatch& b, int s, const V4LayerCache& cache);

// Rotates the trailing rope_dim channels of each of `heads` heads (interleaved pairs) of T rows
// `stride` floats apart, token t at pos[t] (negative: rotated back).
void v4_rope_tail(int rope_dim, float theta, const kernels::RopeScaling& scaling, float* x,
                  int64_t T, int heads, int head_dim, int64_t stride, const int32_t* pos);

// out [T, groups * rank] = wo_a by groups: rows [g * rank, (g + 1) * rank) of wo_a times columns
// [g * in_width / groups, ...) of in [T, in_width]. FP8 scales are sliced by wo_a.fp8_block rows
// (a group must start on a block edge).
void v4_grouped_projection(const LinearWeight& wo_a, int groups, int64_t rank, const float* in,
                           int64_t T, int64_t in_width, float* out, ForwardContext& ctx);

// Sink attention of every query row t < T (q and out [T, n_heads * head_dim]) over the keys that
// gather(t, scratch) puts in scratch.keys, the rows split over the pool's threads (one scratch
// per thread in per_thread). Queries are independent: a row's arithmetic does not depend on the
// split. V4 and V4.1 differ only in which keys a query sees.
void v4_sink_attention_rows(int64_t T, int n_heads, int head_dim, const float* sinks, const float* q,
                            float* out, std::vector<V4QueryScratch>& per_thread, ForwardContext& ctx,
                            const std::function<void(int64_t t, V4QueryScratch&)>& gather);

// The indexer's choice for one query: the min(k, n_visible) entries of highest score
// (ties: lower entry first), into `out`; returns how many.
int v4_indexer_topk(const float* scores, int n_visible, int k, int32_t* out);

}  // namespace deepinfer::model
