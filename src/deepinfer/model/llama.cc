// The Llama architecture family (Llama 2/3, SmolLM, Mistral, Qwen2 with attention bias) from
// GGUF or Hugging Face safetensors. Pre-norm decoder: RMSNorm -> GQA attention with RoPE ->
// residual -> RMSNorm -> SwiGLU MLP -> residual; final norm and LM head.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/activation.h"
#include "deepinfer/kernels/cpu/attention.h"
#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/embedding.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/kernels/cpu/rms_norm.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/model.h"
#include "deepinfer/model/architectures.h"
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
  Tensor attn_norm, wq, wk, wv, bq, bk, bv, wo;
  Tensor ffn_norm, w_gate, w_up, w_down;
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

void rms_norm(const float* x, const Tensor& weight, float* y, int64_t rows, int64_t dim, float eps) {
  kernels::RmsNormParams p;
  p.x = x;
  p.w = static_cast<const float*>(weight.data);
  p.y = y;
  p.rows = rows;
  p.dim = dim;
  p.x_stride = dim;
  p.y_stride = dim;
  p.eps = eps;
  kernels::rms_norm(p);
}

void linear(const Tensor& w, const Tensor& bias, const float* in, int64_t rows, float* out,
            ForwardContext& ctx) {
  kernels::MatmulParams p;
  p.weight = w.data;
  p.weight_type = w.dtype;
  p.n_out = w.shape[0];
  p.n_in = w.shape[1];
  p.weight_row_bytes = w.row_stride_bytes();
  p.input = in;
  p.n_rows = rows;
  p.input_stride = p.n_in;
  p.output = out;
  p.output_stride = p.n_out;
  p.batch_invariant = ctx.batch_invariant;
  p.precision = ctx.int8_activations ? kernels::MatmulPrecision::kInt8 : kernels::MatmulPrecision::kHigh;
  kernels::matmul(p, *ctx.pool);
  if (!bias.empty()) {
    const float* b = static_cast<const float*>(bias.data);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < p.n_out; ++o) out[r * p.n_out + o] += b[o];
  }
}

class Llama final : public Model {
 public:
  explicit Llama(ModelConfig config) : config_(std::move(config)) {
    const RopeScalingConfig& rs = config_.rope_scaling;
    if (rs.type == "linear") rope_scaling_.type = kernels::RopeScalingType::kLinear;
    if (rs.type == "llama3") rope_scaling_.type = kernels::RopeScalingType::kLlama3;
    if (rs.type == "yarn") rope_scaling_.type = kernels::RopeScalingType::kYarn;
    rope_scaling_.factor = rs.factor;
    rope_scaling_.low_freq_factor = rs.low_freq_factor;
    rope_scaling_.high_freq_factor = rs.high_freq_factor;
    if (rs.original_max_position > 0) rope_scaling_.original_max_pos = rs.original_max_position;
    rope_scaling_.beta_fast = rs.beta_fast;
    rope_scaling_.beta_slow = rs.beta_slow;
    rope_scaling_.mscale = rs.mscale;
    rope_scaling_.mscale_all_dim = rs.mscale_all_dim;
  }

  Status load(const WeightSource& source) {
    const ModelConfig& c = config_;
    if (c.rope_scaling.type != "none" && c.rope_scaling.type != "linear" &&
        c.rope_scaling.type != "llama3" && c.rope_scaling.type != "yarn")
      return unsupported("{}: unsupported RoPE scaling type '{}'", source.description, c.rope_scaling.type);
    WeightMap weights(source, kLlamaNames);
    const int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    DI_ASSIGN_OR_RETURN(embedding_, weights.get("token_embd.weight", 0, {V, H}));
    DI_ASSIGN_OR_RETURN(output_norm_, weights.get_f32("output_norm.weight", 0, {H}));
    DI_ASSIGN_OR_RETURN(output_, weights.get_optional("output.weight", 0, {V, H}));
    if (output_.empty()) output_ = embedding_;  // tied embeddings
    for (const Tensor* t : {&embedding_, &output_}) {
      if (!kernels::matmul_supports(t->dtype))
        return unsupported("{}: unsupported tensor type {} for the embedding / output matrix",
                           source.description, dtype_name(t->dtype));
    }
    layers_.resize(c.num_layers);
    for (int l = 0; l < c.num_layers; ++l) {
      LlamaLayer& L = layers_[l];
      DI_ASSIGN_OR_RETURN(L.attn_norm, weights.get_f32("blk.{L}.attn_norm.weight", l, {H}));
      DI_ASSIGN_OR_RETURN(L.wq, weights.get("blk.{L}.attn_q.weight", l, {q_dim, H}));
      DI_ASSIGN_OR_RETURN(L.wk, weights.get("blk.{L}.attn_k.weight", l, {kv_dim, H}));
      DI_ASSIGN_OR_RETURN(L.wv, weights.get("blk.{L}.attn_v.weight", l, {kv_dim, H}));
      DI_ASSIGN_OR_RETURN(L.bq, weights.get_f32_optional("blk.{L}.attn_q.bias", l, {q_dim}));
      DI_ASSIGN_OR_RETURN(L.bk, weights.get_f32_optional("blk.{L}.attn_k.bias", l, {kv_dim}));
      DI_ASSIGN_OR_RETURN(L.bv, weights.get_f32_optional("blk.{L}.attn_v.bias", l, {kv_dim}));
      DI_ASSIGN_OR_RETURN(L.wo, weights.get("blk.{L}.attn_output.weight", l, {H, q_dim}));
      DI_ASSIGN_OR_RETURN(L.ffn_norm, weights.get_f32("blk.{L}.ffn_norm.weight", l, {H}));
      DI_ASSIGN_OR_RETURN(L.w_gate, weights.get("blk.{L}.ffn_gate.weight", l, {F, H}));
      DI_ASSIGN_OR_RETURN(L.w_up, weights.get("blk.{L}.ffn_up.weight", l, {F, H}));
      DI_ASSIGN_OR_RETURN(L.w_down, weights.get("blk.{L}.ffn_down.weight", l, {H, F}));
      for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
        if (!kernels::matmul_supports(t->dtype))
          return unsupported("{}: layer {} has a weight of unsupported tensor type {}",
                             source.description, l, dtype_name(t->dtype));
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
    const int64_t H = c.hidden_size, F = c.intermediate_size;
    const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
    const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
    for (int32_t id : batch.token_ids)
      if (id < 0 || id >= c.vocab_size)
        return invalid_argument("token id {} is outside the vocabulary (size {})", id, c.vocab_size);
    ws_.reserve(T, c);

    kernels::embedding_lookup(embedding_.data, embedding_.dtype, embedding_.row_stride_bytes(), H,
                              batch.token_ids.data(), T, ws_.x.data());

    std::vector<kernels::AttentionSeq> seqs(batch.num_seqs());
    for (int s = 0; s < batch.num_seqs(); ++s) {
      const int32_t start = batch.seq_token_start[s];
      const int32_t n = batch.seq_token_start[s + 1] - start;
      seqs[s].token_start = start;
      seqs[s].n_tokens = n;
      seqs[s].context_len = batch.seq_context_len[s];
      seqs[s].first_pos = batch.seq_context_len[s] - n;
      seqs[s].block_table = batch.block_table.data() + batch.block_table_indptr[s];
    }

    kernels::RopeParams rope;
    rope.n_tokens = T;
    rope.head_dim = c.head_dim;
    rope.rot_dim = c.rope_dim;
    rope.positions = batch.positions.data();
    rope.theta = c.rope_theta;
    rope.layout = c.rope_pairing == RopePairing::kInterleaved ? kernels::RopeLayout::kInterleaved
                                                              : kernels::RopeLayout::kHalf;
    rope.scaling = rope_scaling_;

    for (int l = 0; l < c.num_layers; ++l) {
      const LlamaLayer& L = layers_[l];
      // attention block
      rms_norm(ws_.x.data(), L.attn_norm, ws_.h.data(), T, H, c.rms_norm_eps);
      linear(L.wq, L.bq, ws_.h.data(), T, ws_.q.data(), ctx);
      linear(L.wk, L.bk, ws_.h.data(), T, ws_.k.data(), ctx);
      linear(L.wv, L.bv, ws_.h.data(), T, ws_.v.data(), ctx);
      rope.x = ws_.q.data();
      rope.n_heads = c.num_heads;
      rope.token_stride = q_dim;
      kernels::rope(rope);
      rope.x = ws_.k.data();
      rope.n_heads = c.num_kv_heads;
      rope.token_stride = kv_dim;
      kernels::rope(rope);
      kernels::KvWriteParams kw;
      kw.k = ws_.k.data();
      kw.k_stride = kv_dim;
      kw.v = ws_.v.data();
      kw.v_stride = kv_dim;
      kw.n_tokens = T;
      kw.slot_mapping = batch.slot_mapping.data();
      kw.k_cache = cache.k[l].data();
      kw.v_cache = cache.v[l].data();
      kw.kv_type = DType::kF32;
      kw.block_size = cache.block_size;
      kw.block_stride = kv_dim * cache.block_size;
      kw.token_stride = kv_dim;
      kw.k_row_elems = kv_dim;
      kw.v_row_elems = kv_dim;
      kernels::kv_cache_write(kw);

      kernels::AttentionParams ap;
      ap.q = ws_.q.data();
      ap.q_stride = q_dim;
      ap.k_cache = cache.k[l].data();
      ap.v_cache = cache.v[l].data();
      ap.kv_type = DType::kF32;
      ap.block_size = cache.block_size;
      ap.token_stride = kv_dim;
      ap.block_stride = kv_dim * cache.block_size;
      ap.n_heads = c.num_heads;
      ap.n_kv_heads = c.num_kv_heads;
      ap.head_dim = c.head_dim;
      ap.v_head_dim = c.head_dim;
      ap.sliding_window = 0;
      ap.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      ap.out = ws_.attn.data();
      ap.out_stride = q_dim;
      ap.seqs = seqs.data();
      ap.n_seqs = static_cast<int>(seqs.size());
      kernels::attention(ap, *ctx.pool);

      linear(L.wo, Tensor{}, ws_.attn.data(), T, ws_.h.data(), ctx);
      kernels::add(ws_.x.data(), ws_.h.data(), ws_.x.data(), T * H);

      // MLP block
      rms_norm(ws_.x.data(), L.ffn_norm, ws_.h.data(), T, H, c.rms_norm_eps);
      linear(L.w_gate, Tensor{}, ws_.h.data(), T, ws_.gate.data(), ctx);
      linear(L.w_up, Tensor{}, ws_.h.data(), T, ws_.up.data(), ctx);
      kernels::swiglu(ws_.gate.data(), ws_.up.data(), ws_.gate.data(), T * F);
      linear(L.w_down, Tensor{}, ws_.gate.data(), T, ws_.h.data(), ctx);
      kernels::add(ws_.x.data(), ws_.h.data(), ws_.x.data(), T * H);
    }

    // Only the rows whose logits are wanted go through the final norm and the LM head.
    const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
    for (int64_t r = 0; r < R; ++r) {
      const int32_t row = batch.logits_rows[r];
      DI_CHECK(row >= 0 && row < T, "logits row {} outside batch of {}", row, T);
      std::memcpy(ws_.h.data() + r * H, ws_.x.data() + int64_t{row} * H, sizeof(float) * H);
    }
    rms_norm(ws_.h.data(), output_norm_, ws_.logits_in.data(), R, H, c.rms_norm_eps);
    linear(output_, Tensor{}, ws_.logits_in.data(), R, logits, ctx);
    return Status::ok();
  }

 private:
  ModelConfig config_;
  kernels::RopeScaling rope_scaling_;
  Tensor embedding_, output_norm_, output_;
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
