// DeepSeek-V4.1's attention block, per layer: V4's low-rank q (no per-head norm in V4.1), one
// shared K=V head with partial interleaved RoPE, the sliding window on every layer, plus at a
// compressed layer the entries of its KV source (the source's compressor runs at the source
// only; the layers reading it use its entries), chosen by the indexer's top-k at an index
// source (within the candidate blocks after the candidate source) and reused unchanged from
// the latest index source elsewhere. A learned sink per head, the output's rope channels
// rotated back at the query, the grouped wo_a, wo_b. New rows and entries are written before
// the queries read them, so a token sees its own chunk as well as the cache.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_weights.h"
#include "deepinfer/model/deepseek_v4_attention.h"
#include "deepinfer/model/forward_batch.h"

namespace deepinfer::model {

// What index sources publish to the layers after them within one forward (per batch token):
// the latest top-k, and the candidate source's mask. Reset by v41_picks_reset each forward.
struct V41Picks {
  std::vector<int32_t> topk;         // [T, index_topk] entry indices, ascending
  std::vector<int32_t> n_topk;       // [T] how many of each row are set
  std::vector<uint8_t> candidates;   // [cand_indptr[T]] token t's mask over its visible entries
  std::vector<int64_t> cand_indptr;  // [T + 1]
  int topk_layer = -1;               // the index source that wrote topk (-1: none yet)
  int candidate_layer = -1;          // the candidate source that wrote the mask (-1: none yet)
};

void v41_picks_reset(V41Picks& p);

struct V41AttnScratch {
  std::vector<float> qr, q, kv, ckv, cscore, iq, iw, attn, grouped, latents, keys;
  std::vector<int32_t> neg_pos, closed, closed_seq;  // closed: entries made this step
  std::vector<V4QueryScratch> per_thread;
};

// out [T, hidden] = layer `layer`'s attention of the batch's tokens; h [T, hidden] is the normed
// block input. `own` holds the layer's window rows; `source` the pools of its KV source (the
// same as `own` at a source; unused at a window-only layer).
void v41_attention_forward(const DeepseekV41Config& c, int layer, const V41Attention& w,
                           const ForwardBatch& b, const float* h, const V4LayerCache& own,
                           const V4LayerCache& source, V41Picks& picks, V41AttnScratch& s,
                           ForwardContext& ctx, float* out);

}  // namespace deepinfer::model
