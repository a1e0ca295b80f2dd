// Engram weights and the gated stream update (scalar per token: a few vectors of hidden size).
#include "deepinfer/model/deepseek_v41_engram.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "deepinfer/base/check.h"

namespace deepinfer::model {

Result<V41EngramWeights> load_v41_engram(const V4Names& names, const DeepseekV41Config& cfg,
                                         const EngramHashLayout& layout,
                                         const EngramLayerHash& hash) {
  const std::string p = "layers." + std::to_string(hash.layer) + ".engram.";
  const int64_t hc = cfg.hc_mult, hidden = cfg.hidden, hd = cfg.engram.head_dim;
  V41EngramWeights w;
  DI_ASSIGN_OR_RETURN(w.embed, names.get_f32(p + "embed.weight", {hash.table_rows, hd}));
  DI_ASSIGN_OR_RETURN(w.wkv, load_v41_linear(names, p + "wkv", (hc + 1) * hidden,
                                             layout.n_cols * hd, cfg.fp8_block));
  DI_ASSIGN_OR_RETURN(w.q_weight, names.get_f32(p + "q_weight", {hc, hidden}));
  DI_ASSIGN_OR_RETURN(w.k_weight, names.get_f32(p + "k_weight", {hc, hidden}));
  return w;
}

void v41_engram_update(const DeepseekV41Config& cfg, const EngramHashLayout& layout,
                       const V41EngramWeights& w, std::span<const int64_t> rows, int64_t n_tokens,
                       float* streams, ForwardContext& ctx) {
  const int64_t hc = cfg.hc_mult, hidden = cfg.hidden, hd = cfg.engram.head_dim,
                n_cols = layout.n_cols;
  DI_CHECK(rows.size() == static_cast<size_t>(n_tokens * n_cols), "v41_engram_update: rows");
  const int64_t table_rows = w.embed.shape[0];
  const auto* table = static_cast<const float*>(w.embed.data);
  std::vector<float> gathered(n_tokens * n_cols * hd);  // [n_tokens, n_cols * hd]
  for (int64_t i = 0; i < n_tokens * n_cols; ++i) {
    DI_CHECK(rows[i] >= 0 && rows[i] < table_rows, "v41_engram_update: row out of the table");
    std::copy_n(table + rows[i] * hd, hd, gathered.data() + i * hd);
  }
  std::vector<float> key_value(n_tokens * (hc + 1) *
                               hidden);  // [n_tokens, hc keys + value, hidden]
  linear_forward(w.wkv, gathered.data(), n_tokens, n_cols * hd, key_value.data(), (hc + 1) * hidden,
                 ctx);
  const auto* qw = static_cast<const float*>(w.q_weight.data);
  const auto* kw = static_cast<const float*>(w.k_weight.data);
  const double eps = cfg.rms_eps;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* value = key_value.data() + (t * (hc + 1) + hc) * hidden;
    for (int64_t s = 0; s < hc; ++s) {
      float* h = streams + (t * hc + s) * hidden;
      const float* key = key_value.data() + (t * (hc + 1) + s) * hidden;
      double dot = 0, hh = 0, kk = 0;
      for (int64_t c = 0; c < hidden; ++c) {
        dot += double(h[c]) * qw[s * hidden + c] * kw[s * hidden + c] * key[c];
        hh += double(h[c]) * h[c];
        kk += double(key[c]) * key[c];
      }
      const double score = dot / std::sqrt(hh / hidden + eps) / std::sqrt(kk / hidden + eps) /
                           std::sqrt(double(hidden));
      const double sign = score > 0 ? 1.0 : score < 0 ? -1.0 : 0.0;
      const double gate =
          1.0 / (1.0 + std::exp(-sign * std::sqrt(std::max(std::fabs(score), 1e-6))));
      for (int64_t c = 0; c < hidden; ++c) h[c] += static_cast<float>(gate * value[c]);
    }
  }
}

}  // namespace deepinfer::model
