// The V4 name tables (DeepSeek's names -> transformers') and the lookups and checks of V4Names.
#include "deepinfer/model/deepseek_v4_names.h"

#include <cmath>
#include <memory>
#include <string_view>
#include <utility>

#include "deepinfer/kernels/cpu/fp4_matmul.h"
#include "deepinfer/kernels/cpu/matmul.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {
namespace {

struct Rename {
  std::string_view deepseek;
  std::string_view transformers;
};

// Whole names outside the layers.
constexpr Rename kTopLevel[] = {
    {"embed.weight", "model.embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight"},          {"hc_head_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base"},     {"hc_head_scale", "model.hc_head.hc_scale"},
};

// Suffixes after "layers.N." (transformers: after "model.layers.N.").
constexpr Rename kLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"attn.wq_a", "self_attn.q_a_proj"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b", "self_attn.q_b_proj"},
    {"attn.wkv", "self_attn.kv_proj"},
    {"attn.norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a", "self_attn.o_a_proj"},
    {"attn.wo_b", "self_attn.o_b_proj"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.compressor.wkv", "self_attn.compressor.kv_proj"},
    {"attn.compressor.wgate", "self_attn.compressor.gate_proj"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.indexer.compressor.wkv", "self_attn.compressor.indexer.kv_proj"},
    {"attn.indexer.compressor.wgate", "self_attn.compressor.indexer.gate_proj"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"attn.indexer.wq_b", "self_attn.compressor.indexer.q_b_proj"},
    {"attn.indexer.weights_proj", "self_attn.compressor.indexer.scorer.weights_proj"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.shared_experts.w1", "mlp.shared_experts.gate_proj"},
    {"ffn.shared_experts.w2", "mlp.shared_experts.down_proj"},
    {"ffn.shared_experts.w3", "mlp.shared_experts.up_proj"},
};

// Linear weights' companions: DeepSeek's ".weight" + ".scale", transformers' ".weight" +
// ".weight_scale_inv".
constexpr std::string_view kScaleNames[] = {".scale", ".weight_scale_inv"};

}  // namespace

std::vector<std::string> V4Names::candidates(const std::string& canonical) const {
  std::vector<std::string> out = {canonical, "model." + canonical};
  for (const Rename& r : kTopLevel)
    if (canonical == r.deepseek) out.emplace_back(r.transformers);
  if (canonical.rfind("layers.", 0) == 0) {
    const size_t dot = canonical.find('.', 7);
    const std::string layer = canonical.substr(0, dot + 1), rest = canonical.substr(dot + 1);
    for (const Rename& r : kLayer) {
      if (rest.rfind(r.deepseek, 0) != 0) continue;
      const std::string_view tail = std::string_view(rest).substr(r.deepseek.size());
      if (!tail.empty() && tail[0] != '.') continue;
      out.push_back("model." + layer + std::string(r.transformers) + std::string(tail));
    }
  }
  return out;
}

const Tensor* V4Names::find(const std::string& canonical) const {
  for (const std::string& n : candidates(canonical))
    if (const Tensor* t = source_.safetensors->find(n)) return t;
  return nullptr;
}

std::string V4Names::file_of(const std::string& canonical) const {
  for (const std::string& n : candidates(canonical))
    if (source_.safetensors->find(n)) return source_.safetensors->shard_of(n);
  return source_.description;
}

Status V4Names::missing(const std::string& canonical) const {
  const auto c = candidates(canonical);
  return corrupt("{}: missing tensor '{}' (also looked for '{}')", source_.description, canonical,
                 c.size() > 2 ? c.back() : c[1]);
}

Result<Tensor> V4Names::get(const std::string& canonical, const std::vector<int64_t>& shape) const {
  const Tensor* t = find(canonical);
  if (!t) return missing(canonical);
  DI_RETURN_IF_ERROR(check_shape(*t, shape, source_.description, canonical));
  return *t;
}

Result<Tensor> V4Names::get_f32(const std::string& canonical,
                                const std::vector<int64_t>& shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get(canonical, shape));
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16)
    return unsupported("{}: tensor '{}' has type {} (expected f32, bf16 or f16)",
                       source_.description, canonical, dtype_name(t.dtype));
  return to_f32(t, canonical);
}

Result<Tensor> V4Names::get_scale(const std::string& canonical,
                                  const std::vector<int64_t>& shape) const {
  DI_ASSIGN_OR_RETURN(Tensor t, get(canonical, shape));
  if (t.dtype != DType::kF8_E8M0) return get_f32(canonical, shape);
  auto data = std::shared_ptr<float[]>(new float[static_cast<size_t>(t.numel())]);
  const auto* b = static_cast<const uint8_t*>(t.data);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (b[i] == 0xFF)
      return corrupt("{}: tensor '{}' holds a NaN scale", source_.description, canonical);
    data[i] = std::ldexp(1.0f, int(b[i]) - 127);
  }
  Tensor out = t;
  out.dtype = DType::kF32;
  out.data = data.get();
  out.owner = std::shared_ptr<void>(data, data.get());
  return out;
}

Result<LinearWeight> V4Names::linear(const std::string& prefix, int64_t n_out, int64_t n_in) const {
  LinearWeight w;
  DI_ASSIGN_OR_RETURN(w.weight, get(prefix + ".weight", {n_out, n_in}));
  return with_scale(std::move(w), prefix);
}

Result<LinearWeight> V4Names::with_scale(LinearWeight w, const std::string& prefix) const {
  if (w.weight.dtype == DType::kF8_E4M3) {
    const int64_t bo = (w.n_out() + kFp8Block - 1) / kFp8Block,
                  bi = (w.n_in() + kFp8Block - 1) / kFp8Block;
    for (std::string_view s : kScaleNames) {
      if (!find(prefix + std::string(s))) continue;
      DI_ASSIGN_OR_RETURN(w.scale_inv, get_scale(prefix + std::string(s), {bo, bi}));
      return w;
    }
    return missing(prefix + ".scale");
  }
  if (!kernels::matmul_supports(w.weight.dtype))
    return unsupported("{}: tensor '{}.weight' has unsupported type {}", source_.description,
                       prefix, dtype_name(w.weight.dtype));
  return w;
}

Result<V4Fp4Linear> V4Names::fp4_linear(const std::string& prefix, int64_t n_out,
                                        int64_t n_in) const {
  const std::string wname = prefix + ".weight";
  const Tensor* t = find(wname);
  if (!t) return missing(wname);
  if (t->dtype != DType::kI8)
    return unsupported(
        "{}: tensor '{}' has type {}, but config.json declares expert_dtype fp4 (packed e2m1 "
        "pairs stored as I8)",
        file_of(wname), wname, dtype_name(t->dtype));
  if (n_in % 2 != 0)
    return unsupported("{}: tensor '{}': FP4 packs two inputs a byte, but its input size {} is odd",
                       file_of(wname), wname, n_in);
  DI_RETURN_IF_ERROR(check_shape(*t, {n_out, n_in / 2}, file_of(wname), wname));
  V4Fp4Linear w;
  w.weight = *t;
  w.n_out = n_out;
  w.n_in = n_in;
  std::string sname;
  for (std::string_view s : kScaleNames)
    if (find(prefix + std::string(s))) sname = prefix + std::string(s);
  if (sname.empty()) return missing(prefix + ".scale");
  const Tensor* sc = find(sname);
  if (sc->dtype != DType::kF8_E8M0)
    return unsupported("{}: tensor '{}' has type {} (FP4 expert scales are ue8m0, F8_E8M0)",
                       file_of(sname), sname, dtype_name(sc->dtype));
  const int64_t blocks = (n_in + kernels::kFp4Block - 1) / kernels::kFp4Block;
  DI_RETURN_IF_ERROR(check_shape(*sc, {n_out, blocks}, file_of(sname), sname));
  const auto* b = static_cast<const uint8_t*>(sc->data);
  for (int64_t i = 0; i < sc->numel(); ++i) {
    if (b[i] <= 252) continue;
    if (b[i] == 0xff)
      return corrupt("{}: tensor '{}' holds a NaN scale (0xff) at row {}, block {}", file_of(sname),
                     sname, i / blocks, i % blocks);
    return corrupt(
        "{}: tensor '{}' holds scale 2^{} at row {}, block {} (out of range: its "
        "weights overflow f32)",
        file_of(sname), sname, int(b[i]) - 127, i / blocks, i % blocks);
  }
  w.scale = *sc;
  return w;
}

}  // namespace deepinfer::model
