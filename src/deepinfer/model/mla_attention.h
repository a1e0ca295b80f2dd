// Multi-head latent attention (DeepSeek-V2/V3): per token the cache holds only the normalized KV
// latent (kv_lora_rank) and the shared RoPE key (qk_rope_head_dim), one "KV head" of
// kv_lora_rank + qk_rope_head_dim elements (f32, f16 or bf16) in the engine's paged layout. Prefill expands the
// latents through kv_b_proj into per-head K/V; decode absorbs kv_b_proj into the query and the
// output and attends in latent space (one paged MQA pass over the cache).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/deepseek_v3_weights.h"
#include "deepinfer/model/model.h"

namespace deepinfer::model {

struct MlaDims {
  int n_heads = 0;
  int64_t hidden = 0;
  int q_lora_rank = 0;  // 0: q_proj
  int kv_lora_rank = 0;
  int nope = 0;         // qk_nope_head_dim
  int rope = 0;         // qk_rope_head_dim
  int v = 0;            // v_head_dim
  float eps = 1e-6f;
  float softmax_scale = 0.0f;  // 1/sqrt(nope + rope), times YaRN's mscale^2
  float rope_theta = 10000.0f;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kInterleaved;
  kernels::RopeScaling rope_scaling;
  int qk() const { return nope + rope; }
  int latent() const { return kv_lora_rank + rope; }  // cached floats per token
};

struct MlaWeights {
  LinearWeight q_proj;                  // [n_heads * qk, hidden] when q_lora_rank == 0
  LinearWeight q_a_proj;                // [q_lora_rank, hidden]
  Tensor q_a_norm;                      // f32 [q_lora_rank]
  LinearWeight q_b_proj;                // [n_heads * qk, q_lora_rank]
  LinearWeight kv_a_proj;               // [kv_lora_rank + rope, hidden]
  Tensor kv_a_norm;                     // f32 [kv_lora_rank]
  LinearWeight kv_b_proj;               // [n_heads * (nope + v), kv_lora_rank]
  LinearWeight o_proj;                  // [hidden, n_heads * v]
  // kv_b_proj re-laid out for the absorbed form, f32:
  std::vector<float> w_uk_t;            // [n_heads, kv_lora_rank, nope] (K part, transposed)
  std::vector<float> w_uv;              // [n_heads, v, kv_lora_rank]   (V part)
};

// Loads one layer's attention weights under `prefix` ("model.layers.3.self_attn").
Result<MlaWeights> load_mla(const DeepseekWeights& w, const std::string& prefix, const MlaDims& d);

// Which attention form a sequence uses: kAuto = absorbed for single-token (decode) steps,
// expanded otherwise. The forced modes exist to test the two against each other.
enum class MlaMode { kAuto, kExpanded, kAbsorbed };

// One layer's latent pool: [blocks, block_size, latent] elements of `dtype`.
struct MlaCache {
  void* data = nullptr;
  DType dtype = DType::kF32;  // kF32, kF16 or kBF16
  int block_size = 0;
};

// Activations of one call, grown and reused.
struct MlaScratch {
  std::vector<float> qa, q, kv, q_abs, lat_out, attn, ctx_lat, kvb, k_exp, v_exp;
};

// x: normalized hidden states [T, hidden]; writes this layer's latents into `cache` (rounded to
// its dtype; both attention forms then read every latent, the new ones included, from the
// cache) and the attention output (after o_proj) to out [T, hidden].
Status mla_forward(const MlaWeights& w, const MlaDims& d, MlaMode mode, const ForwardBatch& batch,
                   const float* x, const MlaCache& cache, MlaScratch& s, ForwardContext& ctx, float* out);

}  // namespace deepinfer::model
