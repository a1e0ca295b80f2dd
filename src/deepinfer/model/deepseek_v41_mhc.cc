// V4.1 mHC sites: V4's mixes and expansion, collapse with the previous site's pre.
#include "deepinfer/model/deepseek_v41_mhc.h"

#include <algorithm>
#include <string>

#include "deepinfer/model/layers/rms_norm.h"

namespace deepinfer::model {

Result<V41HcSite> load_v41_hc_site(const V4Names& names, const DeepseekV41Config& cfg, int layer,
                                   const char* site) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  const int64_t hc = cfg.hc_mult, m = (2 + hc) * hc;
  V41HcSite w;
  DI_ASSIGN_OR_RETURN(w.hc.fn, names.get_f32(p + "hc_" + site + "_fn", {m, hc * cfg.hidden}));
  DI_ASSIGN_OR_RETURN(w.hc.base, names.get_f32(p + "hc_" + site + "_base", {m}));
  DI_ASSIGN_OR_RETURN(w.hc.scale, names.get_f32(p + "hc_" + site + "_scale", {3}));
  DI_ASSIGN_OR_RETURN(w.norm, names.get_f32(p + site + "_norm.weight", {cfg.hidden}));
  return w;
}

V4HcDims v41_hc_dims(const DeepseekV41Config& cfg) {
  return V4HcDims{cfg.hc_mult, cfg.hidden, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.rms_eps};
}

void v41_first_pre(int hc, int64_t T, float* pre) {
  std::fill(pre, pre + T * hc, 0.0f);
  for (int64_t t = 0; t < T; ++t) pre[t * hc] = 1.0f;
}

void v41_hc_site(const V4HcDims& d, const V41HcSite& w, const float* x, int64_t T,
                 const float* prev_pre, float* next_pre, float* sublayer_in, V4HcScratch& s,
                 ForwardContext& ctx) {
  v4_hc_mixes(d, w.hc, x, T, next_pre, s, ctx);
  v4_hc_collapse(d, x, prev_pre, T, sublayer_in);
  rms_norm_rows(sublayer_in, d.hidden, w.norm, sublayer_in, d.hidden, T, d.hidden, d.norm_eps);
}

void v41_hc_head(const V4HcDims& d, const Tensor& final_norm, const float* x, int64_t T,
                 const float* last_pre, float* y) {
  v4_hc_collapse(d, x, last_pre, T, y);
  rms_norm_rows(y, d.hidden, final_norm, y, d.hidden, T, d.hidden, d.norm_eps);
}

}  // namespace deepinfer::model
