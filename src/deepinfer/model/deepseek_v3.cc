// DeepSeek-V3 loader (config checks, weight names, MTP layer) and the layer loop: pre-norm MLA and
// dense-or-MoE blocks with residuals, final norm and head; the MTP head reuses the same layer code.
#include "deepinfer/model/deepseek_v3.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/kernels/cpu/elementwise.h"
#include "deepinfer/kernels/cpu/embedding.h"  // check_token_ids
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/model/architectures.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/hf_config_json.h"
#include "deepinfer/model/layers/embedding.h"
#include "deepinfer/model/layers/rope_scaling.h"
#include "deepinfer/parallel/ep_group.h"

namespace deepinfer::model {
namespace {

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// config.json's quantization_config: absent, or DeepSeek's FP8 with 128x128 blocks.
Status check_quantization(const std::string& dir) {
  return hf::check_fp8_block_quantization(hf::read_json_lenient(dir + "/config.json"), dir);
}

// DEEPINFER_ROUTER_ZIPF=alpha skews routing on purpose (skew_router in moe.h): for measuring
// expert-parallel load balance (docs/parallel.md). Unset or empty = off.
Result<float> router_zipf_from_env() {
  const char* v = std::getenv("DEEPINFER_ROUTER_ZIPF");
  if (!v || !*v) return 0.0f;
  char* end = nullptr;
  const float alpha = std::strtof(v, &end);
  if (*end != '\0' || !std::isfinite(alpha) || alpha < 0)
    return invalid_argument("DEEPINFER_ROUTER_ZIPF '{}': want a number >= 0", v);
  return alpha;
}

}  // namespace

DeepseekV3::DeepseekV3(ModelConfig config, kernels::RopeScaling rope_scaling) : config_(std::move(config)) {
  const ModelConfig& c = config_;
  mla_.n_heads = c.num_heads;
  mla_.hidden = c.hidden_size;
  mla_.q_lora_rank = c.q_lora_rank;
  mla_.kv_lora_rank = c.kv_lora_rank;
  mla_.nope = c.qk_nope_head_dim;
  mla_.rope = c.qk_rope_head_dim;
  mla_.v = c.v_head_dim;
  mla_.eps = c.rms_norm_eps;
  mla_.rope_theta = c.rope_theta;
  mla_.rope_layout = rope_layout_of(c.rope_pairing);
  mla_.rope_scaling = rope_scaling;
  mla_.softmax_scale = static_cast<float>(1.0 / std::sqrt(double(mla_.qk())) *
                                          kernels::rope_attention_scale_multiplier(mla_.rope_scaling));
  routing_.n_experts = c.n_routed_experts;
  routing_.top_k = c.num_experts_per_tok;
  routing_.n_group = c.n_group;
  routing_.topk_group = c.topk_group;
  routing_.norm_topk_prob = c.norm_topk_prob;
  routing_.routed_scaling_factor = c.routed_scaling_factor;
}

Result<std::unique_ptr<DeepseekV3>> DeepseekV3::load(const ModelConfig& config, const WeightSource& source) {
  if (!source.safetensors)
    return unsupported("{}: DeepSeek-V3 loads from a Hugging Face safetensors directory, not GGUF",
                       source.description);
  DI_ASSIGN_OR_RETURN(kernels::RopeScaling rope,
                      rope_scaling_from_config(config.rope_scaling, source.description, "deepseek_v3"));
  std::unique_ptr<DeepseekV3> m(new DeepseekV3(config, rope));
  DI_RETURN_IF_ERROR(m->load_weights(source));
  m->source_ = source;  // expert parallelism reads experts again when a rebalance moves them
  return m;
}

Result<DeepseekLayer> DeepseekV3::load_layer(const DeepseekWeights& w, int index) const {
  const ModelConfig& c = config_;
  const std::string p = "model.layers." + std::to_string(index);
  DeepseekLayer L;
  DI_ASSIGN_OR_RETURN(L.attn_norm, w.get_f32(p + ".input_layernorm.weight", {c.hidden_size}));
  DI_ASSIGN_OR_RETURN(L.ffn_norm, w.get_f32(p + ".post_attention_layernorm.weight", {c.hidden_size}));
  DI_ASSIGN_OR_RETURN(L.attn, load_mla(w, p + ".self_attn", mla_));
  L.is_moe = c.n_routed_experts > 0 && index >= c.first_k_dense_replace && index % c.moe_layer_freq == 0;
  if (L.is_moe) {
    DI_ASSIGN_OR_RETURN(L.moe, load_moe(w, p + ".mlp", routing_, c.hidden_size, c.moe_intermediate_size,
                                        c.n_shared_experts));
  } else {
    DI_ASSIGN_OR_RETURN(L.mlp, load_mlp(w, p + ".mlp", c.hidden_size, c.intermediate_size));
  }
  return L;
}

Status DeepseekV3::load_weights(const WeightSource& source) {
  const ModelConfig& c = config_;
  const std::string& where = source.description;
  if (c.attention_bias) return unsupported("{}: deepseek_v3 with attention_bias is not supported", where);
  if (c.n_routed_experts > 0 && (c.scoring_func != "sigmoid" || c.topk_method != "noaux_tc"))
    return unsupported("{}: deepseek_v3 routing scoring_func '{}' / topk_method '{}' is not supported "
                       "(supported: sigmoid / noaux_tc)", where, c.scoring_func, c.topk_method);
  if (c.num_nextn_predict_layers > 1)
    return unsupported("{}: num_nextn_predict_layers {} (at most 1 is supported)", where,
                       c.num_nextn_predict_layers);
  DI_RETURN_IF_ERROR(check_quantization(where));
  DeepseekWeights w(source);
  const int64_t H = c.hidden_size, V = c.vocab_size;
  DI_ASSIGN_OR_RETURN(embedding_, w.get("model.embed_tokens.weight", {V, H}));
  if (embedding_.dtype == DType::kF8_E4M3 || !kernels::matmul_supports(embedding_.dtype))
    return unsupported("{}: embedding type {} is not supported", where, dtype_name(embedding_.dtype));
  DI_ASSIGN_OR_RETURN(output_norm_, w.get_f32("model.norm.weight", {H}));
  if (w.has("lm_head.weight") || !c.tie_word_embeddings) {
    DI_ASSIGN_OR_RETURN(output_, w.linear("lm_head", V, H));
  } else {
    output_.weight = embedding_;
  }
  layers_.resize(c.num_layers);
  DI_ASSIGN_OR_RETURN(const float zipf, router_zipf_from_env());
  for (int l = 0; l < c.num_layers; ++l) {
    DI_ASSIGN_OR_RETURN(layers_[l], load_layer(w, l));
    if (layers_[l].is_moe) skew_router(layers_[l].moe, c.n_routed_experts, l, zipf);
  }
  const std::string mtp = "model.layers." + std::to_string(c.num_layers);
  // Checkpoints converted without the MTP layer still run; only the draft head is unavailable.
  has_mtp_ = c.num_nextn_predict_layers == 1 && w.has(mtp + ".eh_proj.weight");
  if (has_mtp_) {
    DI_ASSIGN_OR_RETURN(mtp_layer_, load_layer(w, c.num_layers));
    DI_ASSIGN_OR_RETURN(mtp_enorm_, w.get_f32(mtp + ".enorm.weight", {H}));
    DI_ASSIGN_OR_RETURN(mtp_hnorm_, w.get_f32(mtp + ".hnorm.weight", {H}));
    DI_ASSIGN_OR_RETURN(mtp_head_norm_, w.get_f32(mtp + ".shared_head.norm.weight", {H}));
    DI_ASSIGN_OR_RETURN(mtp_eh_proj_, w.linear(mtp + ".eh_proj", H, 2 * H));
    // The MTP layer shares the embedding and the head; checkpoints may also store copies.
    mtp_embedding_ = embedding_;
    if (w.has(mtp + ".embed_tokens.weight")) {
      DI_ASSIGN_OR_RETURN(mtp_embedding_, w.get(mtp + ".embed_tokens.weight", {V, H}));
    }
    mtp_head_ = output_;
    if (w.has(mtp + ".shared_head.head.weight")) {
      DI_ASSIGN_OR_RETURN(mtp_head_, w.linear(mtp + ".shared_head.head", V, H));
    }
  }
  expert_stats_.init(c.num_layers + (has_mtp_ ? 1 : 0), std::max(c.n_routed_experts, 1));
  return Status::ok();
}

KvCacheSpec DeepseekV3::kv_cache_spec() const {
  return {config_.num_layers, 1, mla_.latent(), 0};
}

KvCacheSpec DeepseekV3::mtp_kv_cache_spec() const { return {1, 1, mla_.latent(), 0}; }

Status DeepseekV3::check_batch(const ForwardBatch& batch, const KvCache& cache, int layers) const {
  if (cache.spec.num_layers != layers || cache.spec.num_kv_heads != 1 || cache.spec.head_dim != mla_.latent() ||
      static_cast<int>(cache.k.size()) != layers)
    return invalid_argument("KV cache shape (layers {}, heads {}, head_dim {}) does not match deepseek_v3's "
                            "latent cache (layers {}, 1 head, {} floats)", cache.spec.num_layers,
                            cache.spec.num_kv_heads, cache.spec.head_dim, layers, mla_.latent());
  return kernels::check_token_ids(batch.token_ids.data(), batch.num_tokens(), config_.vocab_size);
}

void DeepseekV3::layer_forward(const DeepseekLayer& L, int stats_row, const ForwardBatch& batch,
                               const MlaCache& kv_cache, ForwardContext& ctx) {
  const int64_t T = batch.num_tokens(), H = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  const double t0 = now_seconds();
  rms_norm_rows(x_.data(), H, L.attn_norm, h_.data(), H, T, H, eps);
  Status st = mla_forward(L.attn, mla_, mla_mode_, batch, h_.data(), kv_cache, mla_scratch_, ctx, tmp_.data());
  DI_CHECK(st.is_ok(), "mla_forward: {}", st.message());
  kernels::add(x_.data(), tmp_.data(), x_.data(), T * H);
  const double t1 = now_seconds();
  rms_norm_rows(x_.data(), H, L.ffn_norm, h_.data(), H, T, H, eps);
  if (L.is_moe) {
    if (ep_) {
      moe_forward_ep(L.moe, routing_, stats_row, *ep_, h_.data(), T, H, tmp_.data(),
                     expert_stats_.layer_counts(stats_row), moe_scratch_, ctx);
    } else {
      moe_forward(L.moe, routing_, h_.data(), T, H, tmp_.data(), expert_stats_.layer_counts(stats_row),
                  moe_scratch_, ctx);
    }
  } else {
    mlp_forward(L.mlp, h_.data(), T, H, tmp_.data(), moe_scratch_, ctx);
  }
  kernels::add(x_.data(), tmp_.data(), x_.data(), T * H);
  const double t2 = now_seconds();
  times_.attention += t1 - t0;
  (L.is_moe ? times_.moe : times_.dense_mlp) += t2 - t1;
}

// Final norm and head for the rows whose logits are wanted.
void DeepseekV3::head(const ForwardBatch& batch, const Tensor& norm, const LinearWeight& out, ForwardContext& ctx,
                      float* logits) {
  const int64_t T = batch.num_tokens(), H = config_.hidden_size;
  const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
  grow(rows_, R * H);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t row = batch.logits_rows[r];
    DI_CHECK(row >= 0 && row < T, "logits row {} outside batch of {}", row, T);
    std::memcpy(rows_.data() + r * H, x_.data() + int64_t{row} * H, sizeof(float) * H);
  }
  rms_norm_rows(rows_.data(), H, norm, rows_.data(), H, R, H, config_.rms_norm_eps);
  linear_forward(out, rows_.data(), R, H, logits, config_.vocab_size, ctx);
}

Status DeepseekV3::forward(const ForwardBatch& batch, KvCache& cache, ForwardContext& ctx, float* logits) {
  DI_RETURN_IF_ERROR(check_batch(batch, cache, config_.num_layers));
  const double start = now_seconds();
  if (ep_) ep_ctx_ = ctx;
  const int64_t T = batch.num_tokens(), H = config_.hidden_size;
  grow(x_, T * H);
  grow(h_, T * H);
  grow(tmp_, T * H);
  embed_tokens(embedding_, H, batch.token_ids.data(), T, x_.data());
  for (int l = 0; l < config_.num_layers; ++l) {
    layer_forward(layers_[l], l, batch, {cache.k[l].data(), cache.dtype(), cache.block_size}, ctx);
    if (ctx.after_layer) ctx.after_layer(l);
  }
  if (keep_hidden_) {
    final_hidden_.resize(T * H);
    rms_norm_rows(x_.data(), H, output_norm_, final_hidden_.data(), H, T, H, config_.rms_norm_eps);
  }
  head(batch, output_norm_, output_, ctx, logits);
  times_.total += now_seconds() - start;
  ++times_.forwards;
  return Status::ok();
}

Status DeepseekV3::mtp_forward(const ForwardBatch& batch, const float* prev_hidden, KvCache& mtp_cache,
                               ForwardContext& ctx, float* logits, float* hidden_out) {
  if (!has_mtp_) return unsupported("this deepseek_v3 checkpoint has no MTP layer");
  DI_RETURN_IF_ERROR(check_batch(batch, mtp_cache, 1));
  const int64_t T = batch.num_tokens(), H = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  grow(x_, T * H);
  grow(h_, T * H);
  grow(tmp_, T * 2 * H);
  // tmp_ = [enorm(embed(t+1)) | hnorm(h_t)] per token, then eh_proj into x_.
  embed_tokens(mtp_embedding_, H, batch.token_ids.data(), T, h_.data());
  rms_norm_rows(h_.data(), H, mtp_enorm_, tmp_.data(), 2 * H, T, H, eps);
  rms_norm_rows(prev_hidden, H, mtp_hnorm_, tmp_.data() + H, 2 * H, T, H, eps);
  linear_forward(mtp_eh_proj_, tmp_.data(), T, 2 * H, x_.data(), H, ctx);
  layer_forward(mtp_layer_, config_.num_layers, batch, {mtp_cache.k[0].data(), mtp_cache.dtype(), mtp_cache.block_size},
                ctx);
  if (hidden_out) std::memcpy(hidden_out, x_.data(), sizeof(float) * static_cast<size_t>(T * H));
  head(batch, mtp_head_norm_, mtp_head_, ctx, logits);
  return Status::ok();
}

Result<std::unique_ptr<Model>> load_deepseek_v3(const ModelConfig& config, const WeightSource& source) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<DeepseekV3> m, DeepseekV3::load(config, source));
  return std::unique_ptr<Model>(std::move(m));
}

std::vector<std::vector<uint64_t>> DeepseekV3::expert_token_counts() const {
  std::vector<std::vector<uint64_t>> out(size_t(expert_stats_.num_layers()));
  for (int l = 0; l < expert_stats_.num_layers(); ++l)
    for (int e = 0; e < expert_stats_.num_experts(); ++e) out[size_t(l)].push_back(expert_stats_.count(l, e));
  return out;
}

}  // namespace deepinfer::model
