// DeepSeek-V4.1 weights: the per-layer structs the forward will read and their loader. Which
// tensors a layer holds follows its roles (deepseek_v41_config.h): every layer has the window
// attention, mHC and MoE; a KV source adds its compressor (wgate only at ratio 2); an index source
// adds the indexer's query side, and its key side (wk, k_norm) when it is also a KV source; an
// Engram layer adds its table. The names are DeepSeek's (tried as is and under "model.", through
// V4Names); the list of tensors is one table in deepseek_v41_weights.cc.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v41_engram.h"
#include "deepinfer/model/deepseek_v41_engram_hash.h"
#include "deepinfer/model/deepseek_v4_weights.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// An index source's indexer: queries from the q LoRA latent; keys (at a KV source only) from the
// compressed latent, k_norm(wk(latent)).
struct V41Indexer {
  LinearWeight wq_b = {};          // [index_n_heads * index_head_dim, q_lora_rank]
  LinearWeight weights_proj = {};  // [index_n_heads, hidden]
  LinearWeight wk = {};            // [index_head_dim, head_dim] (KV source only)
  Tensor k_norm = {};              // f32 [index_head_dim] (KV source only)
};

struct V41Attention {
  // wo_a: FP8 only when its blocks do not straddle two groups (o_lora_rank a multiple of the
  // block edge, or one group); else widened to f32 at load.
  LinearWeight wq_a = {}, wq_b = {}, wkv = {}, wo_a = {}, wo_b = {};
  Tensor q_norm = {}, kv_norm = {};  // f32
  Tensor sinks = {};                 // f32 [n_heads]: attn.attn_sink
  // KV sources: V4's compressor weights (deepseek_v4_compressor.h runs them), wkv and norm
  // [head_dim]; wgate only at ratio 2 (a per-feature softmax over the pair); no ape.
  V4Compressor compressor = {};
  V41Indexer indexer = {};  // index sources
};

struct V41LayerWeights {
  Tensor attn_norm = {}, ffn_norm = {};  // f32 [hidden]
  V4HyperConnection hc_attn = {}, hc_ffn = {};
  V41Attention attn = {};
  V4Moe moe = {};  // router (weight, selection bias), routed experts (FP4 or plain), shared expert
  bool has_engram = false;
  V41EngramWeights engram = {};  // when has_engram
};

struct V41Weights {
  Tensor embed = {};       // [vocab, hidden] as stored
  LinearWeight head = {};  // [vocab, hidden]
  Tensor norm = {};        // f32 [hidden]
  std::vector<V41LayerWeights> layers = {};
};

// Loads and shape-checks every tensor the config's roles imply, and refuses a tensor a layer
// should not have (a compressor or indexer keys off a KV source, a ratio-1 wgate), so a
// checkpoint whose layout disagrees with its config.json is not half-used. FP8 weights take the
// configured block edge; routed experts are packed FP4 exactly when config.json says
// expert_dtype fp4. Errors name the checkpoint and the tensor.
Result<V41Weights> load_deepseek_v41_weights(const DeepseekV41Config& cfg,
                                             const EngramHashLayout& layout,
                                             const WeightSource& source);

}  // namespace deepinfer::model
