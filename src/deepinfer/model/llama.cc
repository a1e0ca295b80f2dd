// The Llama architecture family (Llama 2/3, SmolLM, Mistral, Qwen2 with attention bias) from
// GGUF or Hugging Face safetensors. Pre-norm decoder: RMSNorm -> GQA attention with RoPE ->
// residual -> RMSNorm -> SwiGLU MLP -> residual; final norm and LM head.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/model/architectures.h"
#include "deepinfer/model/layers/embedding.h"
#include "deepinfer/model/layers/gqa_attention.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/layers/rms_norm.h"
#include "deepinfer/model/layers/rope_scaling.h"
#include "deepinfer/model/layers/swiglu_mlp.h"
#include "deepinfer/model/model.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {
namespace {

// Canonical (GGUF) weight names and their Hugging Face counterparts.
const std::vector<WeightName> kLlamaNames = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight"},
    {"blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight"},
    {"blk.{L}.attn_k.weight", "model.layers.{L}.self_attn.k_proj.weight"},
    {"blk.{L}.attn_v.weight", "model.layers.{L}.self_attn.v_proj.weight"},
    {"blk.{L}.attn_q.bias", "model.layers.{L}.self_attn.q_proj.bias"},
    {"blk.{L}.attn_k.bias", "model.layers.{L}.self_attn.k_proj.bias"},
    {"blk.{L}.attn_v.bias", "model.layers.{L}.self_attn.v_proj.bias"},
    {"blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight"},
    {"blk.{L}.ffn_norm.weight", "model.layers.{L}.post_attention_layernorm.weight"},
    {"blk.{L}.ffn_gate.weight", "model.layers.{L}.mlp.gate_proj.weight"},
    {"blk.{L}.ffn_up.weight", "model.layers.{L}.mlp.up_proj.weight"},
    {"blk.{L}.ffn_down.weight", "model.layers.{L}.mlp.down_proj.weight"},
};

struct LlamaLayer {
  Tensor attn_norm, ffn_norm;  // f32 [hidden]
  GqaWeights attn;
  MlpWeights mlp;
};

// Activations of one forward call, grown to the largest batch seen and then reused.
struct Workspace {
  int64_t capacity = 0;
  AlignedBuffer<float> x, h, q, k, v, attn, gate, up, logits_in;
  void reserve(int64_t tokens, const ModelConfig& c) {
    if (tokens <= capacity) return;
    capacity = tokens;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    x.resize(tokens * c.hidden_size);
    h.resize(tokens * c.hidden_size);
    q.resize(tokens * q_dim);
    k.resize(tokens * kv_dim);
    v.resize(tokens * kv_dim);
    attn.resize(tokens * q_dim);
    gate.resize(tokens * c.intermediate_size);
    up.resize(tokens * c.intermediate_size);
    logits_in.resize(tokens * c.hidden_size);
  }
};

class Llama final : public Model {
 public:
  explicit Llama(ModelConfig config) : config_(std::move(config)) {}

  Status load(const WeightSource& source) {
    const ModelConfig& c = config_;
    attn_.n_heads = c.num_heads;
    attn_.n_kv_heads = c.num_kv_heads;
    attn_.head_dim = c.head_dim;
    attn_.rope_dim = c.rope_dim;
    attn_.rope_theta = c.rope_theta;
    attn_.rope_layout = rope_layout_of(c.rope_pairing);
    DI_ASSIGN_OR_RETURN(attn_.rope_scaling, rope_scaling_from_config(c.rope_scaling, source.description, "llama"));
    attn_.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    WeightMap weights(source, kLlamaNames);
    const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    DI_ASSIGN_OR_RETURN(embedding_, weights.get("token_embd.weight", 0, {V, H}));
    DI_ASSIGN_OR_RETURN(output_norm_, weights.get_f32("output_norm.weight", 0, {H}));
    DI_ASSIGN_OR_RETURN(output_.weight, weights.get_optional("output.weight", 0, {V, H}));
    if (output_.weight.empty()) output_.weight = embedding_;  // tied embeddings
    for (const Tensor* t : {&embedding_, &output_.weight}) {
      if (!kernels::matmul_supports(t->dtype))
        return unsupported("{}: unsupported tensor type {} for the embedding / output matrix",
                           source.description, dtype_name(t->dtype));
    }
    layers_.resize(c.num_layers);
    for (int l = 0; l < c.num_layers; ++l) {
      LlamaLayer& L = layers_[l];
      DI_ASSIGN_OR_RETURN(L.attn_norm, weights.get_f32("blk.{L}.attn_norm.weight", l, {H}));
      DI_ASSIGN_OR_RETURN(L.attn.wq.weight, weights.get("blk.{L}.attn_q.weight", l, {q_dim, H}));
      DI_ASSIGN_OR_RETURN(L.attn.wk.weight, weights.get("blk.{L}.attn_k.weight", l, {kv_dim, H}));
      DI_ASSIGN_OR_RETURN(L.attn.wv.weight, weights.get("blk.{L}.attn_v.weight", l, {kv_dim, H}));
      DI_ASSIGN_OR_RETURN(L.attn.wq.bias, weights.get_f32_optional("blk.{L}.attn_q.bias", l, {q_dim}));
      DI_ASSIGN_OR_RETURN(L.attn.wk.bias, weights.get_f32_optional("blk.{L}.attn_k.bias", l, {kv_dim}));
      DI_ASSIGN_OR_RETURN(L.attn.wv.bias, weights.get_f32_optional("blk.{L}.attn_v.bias", l, {kv_dim}));
      DI_ASSIGN_OR_RETURN(L.attn.wo.weight, weights.get("blk.{L}.attn_output.weight", l, {H, q_dim}));
      DI_ASSIGN_OR_RETURN(L.ffn_norm, weights.get_f32("blk.{L}.ffn_norm.weight", l, {H}));
      DI_ASSIGN_OR_RETURN(L.mlp.gate.weight, weights.get("blk.{L}.ffn_gate.weight", l, {F, H}));
      DI_ASSIGN_OR_RETURN(L.mlp.up.weight, weights.get("blk.{L}.ffn_up.weight", l, {F, H}));
      DI_ASSIGN_OR_RETURN(L.mlp.down.weight, weights.get("blk.{L}.ffn_down.weight", l, {H, F}));
      for (const LinearWeight* w : {&L.attn.wq, &L.attn.wk, &L.attn.wv, &L.attn.wo, &L.mlp.gate, &L.mlp.up,
                                    &L.mlp.down}) {
        if (!kernels::matmul_supports(w->weight.dtype))
          return unsupported("{}: layer {} has a weight of unsupported tensor type {}",
                             source.description, l, dtype_name(w->weight.dtype));
      }
    }
    return Status::ok();
  }

  const ModelConfig& config() const override { return config_; }

  KvCacheSpec kv_cache_spec() const override {
    return {config_.num_layers, config_.num_kv_heads, config_.head_dim, config_.head_dim};
  }

  Status forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx,
                 float* logits) override {
    const ModelConfig& c = config_;
    const int64_t T = batch.num_tokens();
    const int64_t H = c.hidden_size;
    for (int32_t id : batch.token_ids)
      if (id < 0 || id >= c.vocab_size)
        return invalid_argument("token id {} is outside the vocabulary (size {})", id, c.vocab_size);
    ws_.reserve(T, c);

    embed_tokens(embedding_, H, batch.token_ids.data(), T, ws_.x.data());
    DI_CHECK(batch.embeds.size() == batch.embed_rows.size() * static_cast<size_t>(H), "{} embeds for {} rows",
             batch.embeds.size(), batch.embed_rows.size());
    for (size_t i = 0; i < batch.embed_rows.size(); ++i) {
      DI_CHECK(batch.embed_rows[i] >= 0 && batch.embed_rows[i] < T, "embed row {} outside batch", batch.embed_rows[i]);
      std::memcpy(ws_.x.data() + int64_t{batch.embed_rows[i]} * H, batch.embeds.data() + i * H, sizeof(float) * H);
    }
    const std::vector<kernels::AttentionSeq> seqs = attention_seqs(batch);
    const GqaBuffers attn_buf{ws_.q.data(), ws_.k.data(), ws_.v.data(), ws_.attn.data()};

    for (int l = 0; l < c.num_layers; ++l) {
      const LlamaLayer& L = layers_[l];
      rms_norm_rows(ws_.x.data(), H, L.attn_norm, ws_.h.data(), H, T, H, c.rms_norm_eps);
      const GqaCache layer_cache{cache.k[l].data(), cache.v[l].data(), cache.dtype(), cache.block_size};
      gqa_attention_forward(L.attn, attn_, batch, seqs, ws_.h.data(), H, layer_cache, attn_buf, ctx, ws_.h.data());
      kernels::add(ws_.x.data(), ws_.h.data(), ws_.x.data(), T * H);
      rms_norm_rows(ws_.x.data(), H, L.ffn_norm, ws_.h.data(), H, T, H, c.rms_norm_eps);
      swiglu_mlp_forward(L.mlp, ws_.h.data(), T, H, ws_.h.data(), ws_.gate.data(), ws_.up.data(), ctx);
      kernels::add(ws_.x.data(), ws_.h.data(), ws_.x.data(), T * H);
      if (ctx.after_layer) ctx.after_layer(l);
    }

    // Only the rows whose logits are wanted go through the final norm and the LM head.
    const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
    for (int64_t r = 0; r < R; ++r) {
      const int32_t row = batch.logits_rows[r];
      DI_CHECK(row >= 0 && row < T, "logits row {} outside batch of {}", row, T);
      std::memcpy(ws_.h.data() + r * H, ws_.x.data() + int64_t{row} * H, sizeof(float) * H);
    }
    rms_norm_rows(ws_.h.data(), H, output_norm_, ws_.logits_in.data(), H, R, H, c.rms_norm_eps);
    linear_forward(output_, ws_.logits_in.data(), R, H, logits, c.vocab_size, ctx);
    return Status::ok();
  }

 private:
  ModelConfig config_;
  GqaDims attn_;
  Tensor embedding_, output_norm_;
  LinearWeight output_;
  std::vector<LlamaLayer> layers_;
  Workspace ws_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_llama(const ModelConfig& config, const WeightSource& source) {
  auto m = std::make_unique<Llama>(config);
  DI_RETURN_IF_ERROR(m->load(source));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace deepinfer::model
