// DeepSeek-V4.1 Engram at one layer: the rows its n-gram hashes select
// (deepseek_v41_engram_hash.h) are concatenated, projected by engram.wkv into one key per
// hyper-connection stream and one shared value, and each stream takes the value gated by
// sigmoid(signed sqrt(<h * q_weight * k_weight, key> / (rms(h) rms(key) sqrt(hidden)))).
// It runs on the streams at the start of its layer, before the attention mHC.
#pragma once

#include <cstdint>
#include <span>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_engram_hash.h"
#include "deepinfer/model/deepseek_v41_linear.h"
#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

struct V41EngramWeights {
  Tensor embed = {};      // f32 [table_rows, engram_head_dim]: layers.N.engram.embed.weight
  LinearWeight wkv = {};  // [(hc + 1) * hidden, n_cols * engram_head_dim]: keys, then the value
  Tensor q_weight = {};   // f32 [hc, hidden]
  Tensor k_weight = {};   // f32 [hc, hidden]
};

// Layer `hash.layer`'s Engram tensors, shapes checked against the config and the hash layout.
Result<V41EngramWeights> load_v41_engram(const V4Names& names, const DeepseekV41Config& cfg,
                                         const EngramHashLayout& layout,
                                         const EngramLayerHash& hash);

// streams [n_tokens, hc, hidden] updated in place; rows [n_tokens * n_cols] from the hash.
void v41_engram_update(const DeepseekV41Config& cfg, const EngramHashLayout& layout,
                       const V41EngramWeights& w, std::span<const int64_t> rows, int64_t n_tokens,
                       float* streams, ForwardContext& ctx);

}  // namespace deepinfer::model
