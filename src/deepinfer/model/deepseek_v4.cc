// DeepSeek-V4 loader (config, quantisation check, weights) and the layer loop:
// X -> mHC pre -> attn_norm -> attention -> mHC post -> mHC pre -> ffn_norm -> MoE -> mHC post,
// then the hyper-connection head, the final norm and the head.
#include "deepinfer/model/deepseek_v4.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "deepinfer/base/check.h"
#include "deepinfer/base/log.h"
#include "deepinfer/base/timer.h"
#include "deepinfer/kernels/cpu/embedding.h"  // check_token_ids
#include "deepinfer/model/architectures.h"
#include "deepinfer/model/deepseek_v4_batch_check.h"
#include "deepinfer/model/deepseek_v4_state.h"
#include "deepinfer/model/hf_config_json.h"
#include "deepinfer/model/layers/embedding.h"
#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {
namespace {

// config.json's quantization_config: absent, or FP8 e4m3 with 128x128 block scales. Routed
// experts: "expert_dtype" (top level, as DeepSeek's V4-Flash ships it, or inside
// quantization_config) absent, "bf16" or "fp8" (loaded by tensor type), or "fp4" (packed e2m1
// with ue8m0 scales per 32 inputs): returns whether experts are FP4.
Result<bool> check_quantization(const std::string& dir) {
  const nlohmann::json j = hf::read_json_lenient(dir + "/config.json");
  DI_RETURN_IF_ERROR(hf::check_fp8_block_quantization(j, dir));
  if (!j.is_object()) return false;
  std::string experts;
  auto take = [&](const nlohmann::json& o) -> Status {
    if (!o.is_object() || !o.contains("expert_dtype") || o["expert_dtype"].is_null())
      return Status::ok();
    if (!o["expert_dtype"].is_string())
      return invalid_argument("{}/config.json: expert_dtype must be a string, not {}", dir,
                              o["expert_dtype"].dump());
    if (experts.empty()) experts = o["expert_dtype"].get<std::string>();
    return Status::ok();
  };
  if (j.contains("quantization_config")) DI_RETURN_IF_ERROR(take(j["quantization_config"]));
  DI_RETURN_IF_ERROR(take(j));
  if (!experts.empty() && experts != "fp8" && experts != "bf16" && experts != "fp4")
    return unsupported("{}/config.json: expert_dtype '{}' is not supported (bf16, fp8 or fp4)", dir,
                       experts);
  return experts == "fp4";
}

// The MTP block runs as a window-only layer (kV4MtpLayer), as in V4-Flash, whose legacy
// compress_ratios lists 0 after the decoder layers; a compressed MTP block is refused.
Status check_mtp_kind(const std::string& dir, const DeepseekV4Config& v4) {
  const nlohmann::json j = hf::read_json_lenient(dir + "/config.json");
  if (v4.num_mtp_layers <= 0 || !j.is_object() || !j.contains("compress_ratios") ||
      !j["compress_ratios"].is_array() || j.contains("layer_types"))
    return Status::ok();
  const auto& r = j["compress_ratios"];
  if (r.size() > static_cast<size_t>(v4.num_layers) && r[v4.num_layers] != 0)
    return unsupported("{}/config.json: compress_ratios[{}] = {} (a compressed MTP layer) is "
                       "not supported",
                       dir, v4.num_layers, r[v4.num_layers].dump());
  return Status::ok();
}

ModelConfig engine_config(const ModelConfig& base, const DeepseekV4Config& v4) {
  ModelConfig c = base;
  c.architecture = "deepseek_v4";
  c.vocab_size = v4.vocab_size;
  c.hidden_size = v4.hidden;
  c.num_layers = v4.num_layers;
  c.num_heads = v4.n_heads;
  c.num_kv_heads = 1;
  c.head_dim = v4.head_dim;
  c.rope_dim = v4.rope_dim;
  c.max_position = v4.max_position;
  c.rms_norm_eps = v4.rms_eps;
  c.n_routed_experts = v4.n_experts;
  c.num_experts_per_tok = v4.top_k;
  c.moe_intermediate_size = v4.moe_inter;
  c.q_lora_rank = v4.q_lora_rank;
  c.num_nextn_predict_layers = 0;  // set by load(): 1 when the MTP block is loaded
  return c;
}

}  // namespace

DeepseekV4::DeepseekV4(ModelConfig config, DeepseekV4Config v4)
    : config_(std::move(config)), v4_(std::move(v4)) {
  hc_ = {v4_.hc_mult, v4_.hidden, v4_.hc_sinkhorn_iters, v4_.hc_eps, v4_.rms_eps};
  spec_ = v4_kv_cache_spec(v4_);
  mtp_cfg_ = v4_;
  mtp_cfg_.layers.push_back(kV4MtpLayer);
  moe_ = {v4_.n_experts, v4_.top_k, v4_.routed_scaling, v4_.swiglu_limit, v4_.hidden};
  counts_.assign(v4_.num_layers, std::vector<uint64_t>(v4_.n_experts, 0));
}

Result<std::unique_ptr<DeepseekV4>> DeepseekV4::load(const ModelConfig& config,
                                                     const WeightSource& source) {
  if (!source.safetensors)
    return unsupported("{}: deepseek_v4 loads from a Hugging Face safetensors directory, not GGUF",
                       source.description);
  DI_ASSIGN_OR_RETURN(const bool fp4_experts, check_quantization(source.description));
  DI_ASSIGN_OR_RETURN(DeepseekV4Config v4,
                      deepseek_v4_config_from_json(source.description + "/config.json"));
  std::unique_ptr<DeepseekV4> m(new DeepseekV4(engine_config(config, v4), v4));
  DI_RETURN_IF_ERROR(check_mtp_kind(source.description, v4));
  DI_ASSIGN_OR_RETURN(m->w_, load_deepseek_v4_weights(m->v4_, source, fp4_experts));
  if (v4.num_mtp_layers > 0 && m->w_.mtp.empty())
    log::info("{}: config.json declares {} MTP layer(s) but the checkpoint has no mtp.0.*: "
              "no draft head",
              source.description, v4.num_mtp_layers);
  m->config_.num_nextn_predict_layers = static_cast<int>(m->w_.mtp.size());
  return m;
}

KvCacheSpec DeepseekV4::kv_cache_spec() const { return spec_; }

Status DeepseekV4::check_batch(const ForwardBatch& b, const KvCache& cache) const {
  return v4_check_hybrid_batch(spec_, v4_.vocab_size, "deepseek_v4", b, cache);
}

void DeepseekV4::layer_forward(int l, const ForwardBatch& b, KvCache& cache, ForwardContext& ctx) {
  const int64_t T = b.num_tokens(), H = v4_.hidden;
  const V4LayerWeights& L = w_.layers[l];
  // Attention sublayer.
  const double t0 = now_seconds();
  v4_hc_pre(hc_, L.hc_attn, x_.data(), T, collapsed_.data(), hc_scratch_, ctx);
  const double t1 = now_seconds();
  rms_norm_rows(collapsed_.data(), H, L.attn_norm, normed_.data(), H, T, H, v4_.rms_eps);
  const V4LayerCache lc{cache.block_state[l].data(), cache.recent[l].data(), cache.block_size,
                        v4_state_layout(v4_, l, cache.block_size)};
  v4_attention_forward(v4_, l, L.attn, b, normed_.data(), lc, attn_scratch_, ctx, out_.data());
  const double t2 = now_seconds();
  v4_hc_post(hc_, hc_scratch_, out_.data(), T, x_.data());
  // MoE sublayer.
  v4_hc_pre(hc_, L.hc_ffn, x_.data(), T, collapsed_.data(), hc_scratch_, ctx);
  const double t3 = now_seconds();
  rms_norm_rows(collapsed_.data(), H, L.ffn_norm, normed_.data(), H, T, H, v4_.rms_eps);
  if (ep_)
    v4_moe_forward_ep(moe_, L.moe, l, *ep_, normed_.data(), b.token_ids.data(), T, out_.data(),
                      counts_[l].data(), moe_scratch_, ctx);
  else
    v4_moe_forward(moe_, L.moe, normed_.data(), b.token_ids.data(), T, out_.data(),
                   counts_[l].data(), moe_scratch_, ctx);
  const double t4 = now_seconds();
  v4_hc_post(hc_, hc_scratch_, out_.data(), T, x_.data());
  times_.mhc += (t1 - t0) + (t3 - t2) + (now_seconds() - t4);
  times_.attention += t2 - t1;
  times_.moe += t4 - t3;
}

Status DeepseekV4::forward(const ForwardBatch& b, KvCache& cache, ForwardContext& ctx,
                           float* logits) {
  DI_RETURN_IF_ERROR(check_batch(b, cache));
  const double start = now_seconds();
  const int64_t T = b.num_tokens(), H = v4_.hidden, hc = v4_.hc_mult;
  x_.resize(T * hc * H);
  collapsed_.resize(T * H);
  normed_.resize(T * H);
  out_.resize(T * H);
  embed_tokens(w_.embed, H, b.token_ids.data(), T, collapsed_.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < hc; ++i)
      std::memcpy(x_.data() + (t * hc + i) * H, collapsed_.data() + t * H, sizeof(float) * H);
  for (int l = 0; l < v4_.num_layers; ++l) layer_forward(l, b, cache, ctx);
  const double head_start = now_seconds();
  const int64_t R = static_cast<int64_t>(b.logits_rows.size());
  rows_.resize(R * hc * H);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t row = b.logits_rows[r];
    DI_CHECK(row >= 0 && row < T, "logits row {} outside batch of {}", row, T);
    std::memcpy(rows_.data() + r * hc * H, x_.data() + int64_t{row} * hc * H,
                sizeof(float) * hc * H);
  }
  std::vector<float> head_in(R * H);
  v4_hc_head(hc_, w_.hc_head, rows_.data(), R, hc * H, head_in.data(), ctx);
  rms_norm_rows(head_in.data(), H, w_.norm, head_in.data(), H, R, H, v4_.rms_eps);
  linear_forward(w_.head, head_in.data(), R, H, logits, v4_.vocab_size, ctx);
  const double end = now_seconds();
  times_.head += end - head_start;
  times_.total += end - start;
  times_.compress = attn_scratch_.compress_seconds;
  return Status::ok();
}

std::vector<std::vector<uint64_t>> DeepseekV4::expert_token_counts() const { return counts_; }

Result<std::unique_ptr<Model>> load_deepseek_v4(const ModelConfig& config,
                                                const WeightSource& source) {
  DI_ASSIGN_OR_RETURN(std::unique_ptr<DeepseekV4> m, DeepseekV4::load(config, source));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace deepinfer::model
