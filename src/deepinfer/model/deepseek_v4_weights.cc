// DeepSeek-V4 tensor lookup: a canonical (DeepSeek) name, tried as is, under "model.", and
// under transformers' renamed form from the tables below; shape checks; stacked expert views.
#include "deepinfer/model/deepseek_v4_weights.h"

#include <cmath>
#include <cstring>
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

class V4Names {
 public:
  explicit V4Names(const WeightSource& source) : source_(source) {}

  // The names `canonical` may be stored under, DeepSeek's first.
  std::vector<std::string> candidates(const std::string& canonical) const {
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

  const Tensor* find(const std::string& canonical) const {
    for (const std::string& n : candidates(canonical))
      if (const Tensor* t = source_.safetensors->find(n)) return t;
    return nullptr;
  }

  // The shard file holding `canonical` (the checkpoint when absent), for errors about contents.
  std::string file_of(const std::string& canonical) const {
    for (const std::string& n : candidates(canonical))
      if (source_.safetensors->find(n)) return source_.safetensors->shard_of(n);
    return source_.description;
  }

  Status missing(const std::string& canonical) const {
    const auto c = candidates(canonical);
    return corrupt("{}: missing tensor '{}' (also looked for '{}')", source_.description, canonical,
                   c.size() > 2 ? c.back() : c[1]);
  }

  Result<Tensor> get(const std::string& canonical, const std::vector<int64_t>& shape) const {
    const Tensor* t = find(canonical);
    if (!t) return missing(canonical);
    DI_RETURN_IF_ERROR(check_shape(*t, shape, source_.description, canonical));
    return *t;
  }

  Result<Tensor> get_f32(const std::string& canonical, const std::vector<int64_t>& shape) const {
    DI_ASSIGN_OR_RETURN(Tensor t, get(canonical, shape));
    if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16)
      return unsupported("{}: tensor '{}' has type {} (expected f32, bf16 or f16)",
                         source_.description, canonical, dtype_name(t.dtype));
    return to_f32(t, canonical);
  }

  // A block-scale tensor as owned f32: float types, or ue8m0 (F8_E8M0, 2^(byte - 127)) as
  // DeepSeek ships them.
  Result<Tensor> get_scale(const std::string& canonical, const std::vector<int64_t>& shape) const {
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

  Result<LinearWeight> linear(const std::string& prefix, int64_t n_out, int64_t n_in) const {
    LinearWeight w;
    DI_ASSIGN_OR_RETURN(w.weight, get(prefix + ".weight", {n_out, n_in}));
    return with_scale(std::move(w), prefix);
  }

  Result<LinearWeight> with_scale(LinearWeight w, const std::string& prefix) const {
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

  // An FP4 expert projection (V4Fp4Linear): the packed I8 weight and its ue8m0 scale, checked
  // and kept as stored. Every scale byte is read once here: a NaN (0xff) or one whose weights
  // overflow f32 (6 * 2^(b - 127), b > 252) would poison every token routed to the expert.
  Result<V4Fp4Linear> fp4_linear(const std::string& prefix, int64_t n_out, int64_t n_in) const {
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
        return corrupt("{}: tensor '{}' holds a NaN scale (0xff) at row {}, block {}",
                       file_of(sname), sname, i / blocks, i % blocks);
      return corrupt("{}: tensor '{}' holds scale 2^{} at row {}, block {} (out of range: its "
                     "weights overflow f32)",
                     file_of(sname), sname, int(b[i]) - 127, i / blocks, i % blocks);
    }
    w.scale = *sc;
    return w;
  }

  const WeightSource& source() const { return source_; }

 private:
  const WeightSource& source_;
};

// Rows [row0, row0 + rows) of matrix `i` of a stacked [n, R, C] tensor, as a 2-D view.
Tensor stacked_view(const Tensor& t, int64_t i, int64_t row0, int64_t rows) {
  Tensor v = t;
  v.ndim = 2;
  v.shape = {rows, t.shape[2], 0, 0};
  const size_t row = row_bytes(t.dtype, t.shape[2]);
  v.data = static_cast<const uint8_t*>(t.data) + (size_t(i) * t.shape[1] + row0) * row;
  return v;
}

Result<MlpWeights> load_mlp(const V4Names& n, const std::string& p, int64_t hidden, int64_t inter) {
  MlpWeights m;
  DI_ASSIGN_OR_RETURN(m.gate, n.linear(p + ".w1", inter, hidden));
  DI_ASSIGN_OR_RETURN(m.up, n.linear(p + ".w3", inter, hidden));
  DI_ASSIGN_OR_RETURN(m.down, n.linear(p + ".w2", hidden, inter));
  return m;
}

// FP4 experts under DeepSeek's names (the only layout FP4 checkpoints ship in).
Status load_fp4_experts(const V4Names& n, const DeepseekV4Config& c, const std::string& p,
                        V4Moe& moe) {
  moe.fp4_experts.resize(c.n_experts);
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string q = p + "." + std::to_string(e);
    V4Fp4Mlp& m = moe.fp4_experts[e];
    DI_ASSIGN_OR_RETURN(m.gate, n.fp4_linear(q + ".w1", c.moe_inter, c.hidden));
    DI_ASSIGN_OR_RETURN(m.up, n.fp4_linear(q + ".w3", c.moe_inter, c.hidden));
    DI_ASSIGN_OR_RETURN(m.down, n.fp4_linear(q + ".w2", c.hidden, c.moe_inter));
  }
  return Status::ok();
}

// Routed experts of block `block` ("layers.N" or "mtp.0") one by one (DeepSeek) or stacked
// (transformers' gate_up_proj / down_proj); packed FP4 ones when config.json says expert_dtype
// fp4.
Status load_experts(const V4Names& n, const DeepseekV4Config& c, const std::string& block, bool fp4,
                    V4Moe& moe) {
  const std::string p = block + ".ffn.experts";
  const std::string stacked = "model." + block + ".mlp.experts.";
  const Tensor* gate_up = n.source().safetensors->find(stacked + "gate_up_proj");
  if (fp4) return load_fp4_experts(n, c, p, moe);
  if (const Tensor* w1 = n.find(p + ".0.w1.weight"); w1 && w1->dtype == DType::kI8)
    return unsupported(
        "{}: tensor '{}.0.w1.weight' is I8 (packed FP4 experts), but config.json does not declare "
        "expert_dtype fp4",
        n.file_of(p + ".0.w1.weight"), p);
  moe.experts.resize(c.n_experts);
  if (!gate_up || n.find(p + ".0.w1.weight")) {
    for (int e = 0; e < c.n_experts; ++e) {
      DI_ASSIGN_OR_RETURN(moe.experts[e],
                          load_mlp(n, p + "." + std::to_string(e), c.hidden, c.moe_inter));
    }
    return Status::ok();
  }
  const Tensor* down = n.source().safetensors->find(stacked + "down_proj");
  const int64_t I = c.moe_inter, H = c.hidden, E = c.n_experts;
  auto shaped = [](const Tensor* t, int64_t a, int64_t b, int64_t d) {
    return t && t->ndim == 3 && t->shape[0] == a && t->shape[1] == b && t->shape[2] == d;
  };
  if (!shaped(gate_up, E, 2 * I, H) || !shaped(down, E, H, I))
    return corrupt(
        "{}: stacked experts '{}gate_up_proj' {} / 'down_proj' {} do not match the config ([{}, "
        "{}, {}] / "
        "[{}, {}, {}])",
        n.source().description, stacked, gate_up->shape_string(),
        down ? down->shape_string() : "missing", E, 2 * I, H, E, H, I);
  for (int e = 0; e < c.n_experts; ++e) {
    LinearWeight g, u, d;
    g.weight = stacked_view(*gate_up, e, 0, I);
    u.weight = stacked_view(*gate_up, e, I, I);
    d.weight = stacked_view(*down, e, 0, H);
    if (g.weight.dtype == DType::kF8_E4M3)
      return unsupported("{}: FP8 stacked experts '{}gate_up_proj' are not supported",
                         n.source().description, stacked);
    DI_ASSIGN_OR_RETURN(moe.experts[e].gate, n.with_scale(std::move(g), stacked + "gate_up_proj"));
    DI_ASSIGN_OR_RETURN(moe.experts[e].up, n.with_scale(std::move(u), stacked + "gate_up_proj"));
    DI_ASSIGN_OR_RETURN(moe.experts[e].down, n.with_scale(std::move(d), stacked + "down_proj"));
  }
  return Status::ok();
}

Result<std::vector<int32_t>> load_tid2eid(const V4Names& n, const DeepseekV4Config& c,
                                          const std::string& name) {
  DI_ASSIGN_OR_RETURN(Tensor t, n.get(name, {c.vocab_size, c.top_k}));
  if (t.dtype != DType::kI64 && t.dtype != DType::kI32)
    return unsupported("{}: tensor '{}' has type {} (expected an integer table)",
                       n.source().description, name, dtype_name(t.dtype));
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t v = t.dtype == DType::kI64 ? static_cast<const int64_t*>(t.data)[i]
                                             : static_cast<const int32_t*>(t.data)[i];
    if (v < 0 || v >= c.n_experts)
      return corrupt("{}: tensor '{}' holds expert {} (the config has {} experts)",
                     n.source().description, name, v, c.n_experts);
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

Result<V4HyperConnection> load_hc(const V4Names& n, const std::string& p, int64_t rows,
                                  int64_t cols, int64_t n_scale) {
  V4HyperConnection h;
  DI_ASSIGN_OR_RETURN(h.fn, n.get_f32(p + "_fn", {rows, cols}));
  DI_ASSIGN_OR_RETURN(h.base, n.get_f32(p + "_base", {rows}));
  DI_ASSIGN_OR_RETURN(h.scale, n.get_f32(p + "_scale", {n_scale}));
  return h;
}

Result<V4Compressor> load_compressor(const V4Names& n, const std::string& p, int64_t hidden,
                                     int64_t dim, int ratio, bool overlap) {
  V4Compressor k;
  const int64_t width = overlap ? 2 * dim : dim;
  DI_ASSIGN_OR_RETURN(k.wkv, n.linear(p + ".wkv", width, hidden));
  DI_ASSIGN_OR_RETURN(k.wgate, n.linear(p + ".wgate", width, hidden));
  DI_ASSIGN_OR_RETURN(k.ape, n.get_f32(p + ".ape", {ratio, width}));
  DI_ASSIGN_OR_RETURN(k.norm, n.get_f32(p + ".norm.weight", {dim}));
  return k;
}

Result<V4Attention> load_attention(const V4Names& n, const DeepseekV4Config& c,
                                   const std::string& block, const V4Layer& L) {
  const std::string p = block + ".attn";
  const int64_t H = c.hidden, D = c.head_dim, nh = c.n_heads;
  V4Attention a;
  DI_ASSIGN_OR_RETURN(a.wq_a, n.linear(p + ".wq_a", c.q_lora_rank, H));
  DI_ASSIGN_OR_RETURN(a.q_norm, n.get_f32(p + ".q_norm.weight", {c.q_lora_rank}));
  DI_ASSIGN_OR_RETURN(a.wq_b, n.linear(p + ".wq_b", nh * D, c.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.wkv, n.linear(p + ".wkv", D, H));
  DI_ASSIGN_OR_RETURN(a.kv_norm, n.get_f32(p + ".norm.weight", {D}));
  DI_ASSIGN_OR_RETURN(
      a.wo_a, n.linear(p + ".wo_a", int64_t{c.o_groups} * c.o_lora_rank, nh * D / c.o_groups));
  DI_ASSIGN_OR_RETURN(a.wo_b, n.linear(p + ".wo_b", H, int64_t{c.o_groups} * c.o_lora_rank));
  // The grouped projection runs wo_a one group of o_lora_rank rows at a time; FP8 blocks must
  // not straddle two groups.
  if (a.wo_a.weight.dtype == DType::kF8_E4M3 && c.o_groups > 1 && c.o_lora_rank % kFp8Block != 0)
    return unsupported(
        "{}: FP8 tensor '{}.wo_a.weight' with o_lora_rank {} (not a multiple of {}) is not "
        "supported",
        n.source().description, p, c.o_lora_rank, kFp8Block);
  DI_ASSIGN_OR_RETURN(a.sinks, n.get_f32(p + ".attn_sink", {nh}));
  if (L.attn == V4Attn::kWindow) return a;
  const bool csa = L.attn == V4Attn::kCsa;
  DI_ASSIGN_OR_RETURN(a.compressor, load_compressor(n, p + ".compressor", H, D, L.ratio, csa));
  if (!csa) return a;
  const int64_t Di = c.index_head_dim;
  DI_ASSIGN_OR_RETURN(a.indexer.compressor,
                      load_compressor(n, p + ".indexer.compressor", H, Di, L.ratio, true));
  DI_ASSIGN_OR_RETURN(a.indexer.wq_b,
                      n.linear(p + ".indexer.wq_b", c.index_n_heads * Di, c.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.indexer.weights_proj,
                      n.linear(p + ".indexer.weights_proj", c.index_n_heads, H));
  return a;
}

// One block (a decoder layer "layers.N" or the MTP's "mtp.0") of kind L.
Result<V4LayerWeights> load_block(const V4Names& n, const DeepseekV4Config& c,
                                  const std::string& p, const V4Layer& L, bool fp4) {
  const int64_t H = c.hidden, hc = c.hc_mult;
  V4LayerWeights w;
  DI_ASSIGN_OR_RETURN(w.attn_norm, n.get_f32(p + ".attn_norm.weight", {H}));
  DI_ASSIGN_OR_RETURN(w.ffn_norm, n.get_f32(p + ".ffn_norm.weight", {H}));
  DI_ASSIGN_OR_RETURN(w.hc_attn, load_hc(n, p + ".hc_attn", (2 + hc) * hc, hc * H, 3));
  DI_ASSIGN_OR_RETURN(w.hc_ffn, load_hc(n, p + ".hc_ffn", (2 + hc) * hc, hc * H, 3));
  DI_ASSIGN_OR_RETURN(w.attn, load_attention(n, c, p, L));
  DI_ASSIGN_OR_RETURN(w.moe.gate, n.get_f32(p + ".ffn.gate.weight", {c.n_experts, H}));
  if (L.hash_moe) {
    DI_ASSIGN_OR_RETURN(w.moe.tid2eid, load_tid2eid(n, c, p + ".ffn.gate.tid2eid"));
  } else if (n.find(p + ".ffn.gate.bias")) {
    DI_ASSIGN_OR_RETURN(w.moe.bias, n.get_f32(p + ".ffn.gate.bias", {c.n_experts}));
  }
  DI_RETURN_IF_ERROR(load_experts(n, c, p, fp4, w.moe));
  DI_ASSIGN_OR_RETURN(w.moe.shared, load_mlp(n, p + ".ffn.shared_experts", H, c.moe_inter));
  return w;
}

Result<std::vector<V4MtpWeights>> load_mtp(const V4Names& n, const DeepseekV4Config& c, bool fp4) {
  std::vector<V4MtpWeights> out;
  if (c.num_mtp_layers <= 0 || !n.find("mtp.0.e_proj.weight")) return out;
  const int64_t H = c.hidden, hc = c.hc_mult;
  V4MtpWeights& m = out.emplace_back();
  DI_ASSIGN_OR_RETURN(m.block, load_block(n, c, "mtp.0", kV4MtpLayer, fp4));
  DI_ASSIGN_OR_RETURN(m.e_proj, n.linear("mtp.0.e_proj", H, H));
  DI_ASSIGN_OR_RETURN(m.h_proj, n.linear("mtp.0.h_proj", H, H));
  DI_ASSIGN_OR_RETURN(m.enorm, n.get_f32("mtp.0.enorm.weight", {H}));
  DI_ASSIGN_OR_RETURN(m.hnorm, n.get_f32("mtp.0.hnorm.weight", {H}));
  DI_ASSIGN_OR_RETURN(m.norm, n.get_f32("mtp.0.norm.weight", {H}));
  DI_ASSIGN_OR_RETURN(m.hc_head, load_hc(n, "mtp.0.hc_head", hc, hc * H, 1));
  return out;
}

}  // namespace

Result<V4Weights> load_deepseek_v4_weights(const DeepseekV4Config& c, const WeightSource& source,
                                           bool fp4_experts) {
  if (!source.safetensors)
    return unsupported("{}: deepseek_v4 loads from a Hugging Face safetensors directory, not GGUF",
                       source.description);
  V4Names n(source);
  V4Weights w;
  const int64_t H = c.hidden, V = c.vocab_size, hc = c.hc_mult;
  DI_ASSIGN_OR_RETURN(w.embed, n.get("embed.weight", {V, H}));
  if (w.embed.dtype != DType::kF32 && w.embed.dtype != DType::kBF16 && w.embed.dtype != DType::kF16)
    return unsupported("{}: embedding type {} is not supported", source.description,
                       dtype_name(w.embed.dtype));
  if (n.find("head.weight") || !c.tie_embeddings) {
    DI_ASSIGN_OR_RETURN(w.head, n.linear("head", V, H));
  } else {
    w.head.weight = w.embed;
  }
  DI_ASSIGN_OR_RETURN(w.norm, n.get_f32("norm.weight", {H}));
  DI_ASSIGN_OR_RETURN(w.hc_head, load_hc(n, "hc_head", hc, hc * H, 1));
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    DI_ASSIGN_OR_RETURN(w.layers[l],
                        load_block(n, c, "layers." + std::to_string(l), c.layers[l], fp4_experts));
  }
  DI_ASSIGN_OR_RETURN(w.mtp, load_mtp(n, c, fp4_experts));
  return w;
}

}  // namespace deepinfer::model
