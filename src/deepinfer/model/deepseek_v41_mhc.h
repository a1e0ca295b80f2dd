// DeepSeek-V4.1's use of the mHC streams: V4's pre / post / comb and Sinkhorn (deepseek_v4_mhc.h),
// but each site's sublayer input collapses the streams with the PREVIOUS site's pre (the first
// layer's attention: one-hot on stream 0), and the head collapses with the last FFN site's pre
// (V4.1 has no hc_head). A layer: pre_a = mixes(attn); in = norm(collapse(X, pre_prev));
// X = post/comb expansion of attention; pre_f = mixes(ffn) of the new X; in = norm(collapse(X,
// pre_a)); X = expansion of the MoE; pre_prev = pre_f.
#pragma once

#include <cstdint>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v4_mhc.h"
#include "deepinfer/model/deepseek_v4_names.h"

namespace deepinfer::model {

// One site's mHC parameters and the norm of its sublayer input.
struct V41HcSite {
  V4HyperConnection hc = {};
  Tensor norm = {};  // f32 [hidden]: attn_norm or ffn_norm
};

// layers.N.hc_{attn|ffn}_{fn,base,scale} and layers.N.{attn|ffn}_norm.weight; site "attn" or "ffn".
Result<V41HcSite> load_v41_hc_site(const V4Names& names, const DeepseekV41Config& cfg, int layer,
                                   const char* site);

V4HcDims v41_hc_dims(const DeepseekV41Config& cfg);

// pre [T, hc] of the first site: 1 on stream 0.
void v41_first_pre(int hc, int64_t T, float* pre);

// The site of streams x [T, hc, hidden]: its own pre -> next_pre [T, hc] (post/comb kept in s
// for v4_hc_post), and sublayer_in [T, hidden] = norm(collapse(x, prev_pre)).
void v41_hc_site(const V4HcDims& d, const V41HcSite& w, const float* x, int64_t T,
                 const float* prev_pre, float* next_pre, float* sublayer_in, V4HcScratch& s,
                 ForwardContext& ctx);

// The head's input: y [T, hidden] = final_norm(collapse(x, last_pre)).
void v41_hc_head(const V4HcDims& d, const Tensor& final_norm, const float* x, int64_t T,
                 const float* last_pre, float* y);

}  // namespace deepinfer::model
