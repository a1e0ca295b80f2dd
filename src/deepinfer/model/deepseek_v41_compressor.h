// DeepSeek-V4.1's compressor at a KV source, on V4's (deepseek_v4_compressor.h): one entry per
// `ratio` tokens (1 or 2), no overlap, no position bias; ratio 1 has no wgate (one slot a window),
// ratio 2 pools the pair by a per-feature softmax of wgate's scores. The entry is RMS-normed and
// rotated at position w * ratio with the compressed layers' RoPE. At an index source the indexer's
// keys come from the same entry before its rotation: k_norm(wk(latent)), then rotated there too.
#pragma once

#include <cstdint>

#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_weights.h"
#include "deepinfer/model/deepseek_v4_compressor.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {

// V4's compressor sizes for a V4.1 KV source of `ratio`. The offsets (kv_off, score_off,
// entry_off) are left 0 for the caller's state layout.
V4CompressorDims v41_compressor_dims(const DeepseekV41Config& c, int ratio);

// keys [n, index_head_dim] of the entries `entry_index` [n] from their pre-RoPE latents
// [n, head_dim] (v4_pool_entry): k_norm(wk(latent)), trailing rope_dim channels rotated at
// entry_index * ratio.
void v41_index_keys(const DeepseekV41Config& c, const V41Indexer& w, int ratio,
                    const float* latents, const int32_t* entry_index, int64_t n, float* keys,
                    ForwardContext& ctx);

}  // namespace deepinfer::model
