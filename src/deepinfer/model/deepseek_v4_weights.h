// DeepSeek-V4 weights: the per-layer structs the forward reads, and the loader that finds every
// tensor under DeepSeek's own checkpoint name (embed.weight, layers.N.attn.wq_a.weight, ...),
// the same name under transformers' "model." prefix (what save_pretrained writes), or
// transformers' renamed form (model.layers.N.self_attn.q_a_proj.weight, stacked
// mlp.experts.gate_up_proj, ...), through one name table.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4_config.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/layers/swiglu_mlp.h"
#include "deepinfer/model/model.h"
#include "deepinfer/tensor/tensor.h"

namespace deepinfer::model {

// mHC parameters of one site (attention or FFN): fn [(2 + hc) * hc, hc * hidden], base
// [(2 + hc) * hc], scale [3]; for the head: fn [hc, hc * hidden], base [hc], scale [1]. f32.
struct V4HyperConnection {
  Tensor fn, base, scale;
};

// A compressor (main one: dim = head_dim; the indexer's: dim = index_head_dim). CSA layers
// project to 2 * dim (the overlapping Ca | Cb series), HCA layers to dim.
struct V4Compressor {
  LinearWeight wkv, wgate;
  Tensor ape;   // f32 [ratio, width]
  Tensor norm;  // f32 [dim]
};

struct V4Indexer {
  V4Compressor compressor;
  LinearWeight wq_b;          // [index_n_heads * index_head_dim, q_lora_rank]
  LinearWeight weights_proj;  // [index_n_heads, hidden]
};

struct V4Attention {
  LinearWeight wq_a, wq_b, wkv, wo_a, wo_b;
  Tensor q_norm, kv_norm;   // f32
  Tensor sinks;             // f32 [n_heads]
  V4Compressor compressor;  // CSA/HCA layers
  V4Indexer indexer;        // CSA layers
};

// A routed expert projection in FP4 e2m1 (DeepSeek-V4 Instruct's experts, config.json
// "expert_dtype": "fp4"): `weight` I8 [n_out, n_in / 2], two e2m1 codes a byte (low nibble = even
// input); `scale` F8_E8M0 [n_out, ceil(n_in / 32)], one power of two per 32 inputs. Both are the
// checkpoint's own bytes (mapped, never widened in memory); kernels::fp4_matmul reads them.
struct V4Fp4Linear {
  Tensor weight, scale;
  int64_t n_out = 0, n_in = 0;
};

struct V4Fp4Mlp {
  V4Fp4Linear gate, up, down;  // w1, w3, w2
};

struct V4Moe {
  Tensor gate;                   // f32 [n_experts, hidden]
  Tensor bias;                   // f32 [n_experts] selection bias (top-k layers)
  std::vector<int32_t> tid2eid;  // [vocab * top_k] (hash layers)
  std::vector<MlpWeights> experts;    // [n_experts] bf16 / f32 / FP8 experts, or empty
  std::vector<V4Fp4Mlp> fp4_experts;  // [n_experts] FP4 experts, or empty
  MlpWeights shared;
};

struct V4LayerWeights {
  Tensor attn_norm, ffn_norm;  // f32 [hidden]
  V4HyperConnection hc_attn, hc_ffn;
  V4Attention attn;
  V4Moe moe;
};

// The MTP block's kind (DeepSeek's V4-Flash: compress_ratios lists 0 for it; a layer id past the
// hash layers, so top-k routing).
inline constexpr V4Layer kV4MtpLayer{V4Attn::kWindow, 0, false};

// The MTP block (DeepSeek's mtp.0.*): x = e_proj(enorm(embed(next token))) added to every stream
// of h_proj(hnorm(main streams)), one window-only decoder block with its own hyper-connections
// and top-k MoE, then its own hyper-connection head and norm before the main model's head.
struct V4MtpWeights {
  V4LayerWeights block;
  LinearWeight e_proj, h_proj;  // [hidden, hidden]
  Tensor enorm, hnorm, norm;    // f32 [hidden]
  V4HyperConnection hc_head;    // fn [hc, hc * hidden], base [hc], scale [1]
};

struct V4Weights {
  Tensor embed;
  LinearWeight head;
  Tensor norm;  // f32
  V4HyperConnection hc_head;
  std::vector<V4LayerWeights> layers;
  std::vector<V4MtpWeights> mtp;  // [0 or 1]: mtp.0 when config and checkpoint both have it
};

// Loads and shape-checks every tensor the config implies (the MTP block when config.json has
// num_nextn_predict_layers > 0 and the checkpoint holds mtp.0.e_proj.weight: transformers'
// save_pretrained drops mtp.*; once mtp.0 is there, any missing piece is an error). Errors name
// the checkpoint and the tensor (with the other names it was looked for under). fp4_experts:
// config.json declares "expert_dtype": "fp4", so routed experts must be packed FP4 (and only then
// may they be).
Result<V4Weights> load_deepseek_v4_weights(const DeepseekV4Config& c, const WeightSource& source,
                                           bool fp4_experts = false);

}  // namespace deepinfer::model
