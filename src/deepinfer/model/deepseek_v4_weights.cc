// DeepSeek-V4 weights: every block's tensors through V4Names (deepseek_v4_names.h), stacked
// expert views, FP4 experts, the MTP block.
#include "deepinfer/model/deepseek_v4_weights.h"

#include <string>
#include <utility>

#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/weight_map.h"

namespace deepinfer::model {
namespace {

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
Result<V4LayerWeights> load_block(const V4Names& n, const DeepseekV4Config& c, const std::string& p,
                                  const V4Layer& L, bool fp4) {
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
