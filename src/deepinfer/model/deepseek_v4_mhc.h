// Manifold-constrained hyper-connections (mHC) of DeepSeek-V4: the residual is hc parallel
// streams X [T, hc, hidden]. Before a sublayer, mixes = fn . X / rms(X) give pre (collapse
// weights), post (expand weights) and comb (stream mixing, made doubly stochastic by Sinkhorn);
// after it, X'[k] = post[k] * out + sum_j comb[j][k] * X[j]. The head collapses with pre only.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4_weights.h"

namespace deepinfer::model {

struct V4HcDims {
  int hc = 0;
  int64_t hidden = 0;
  int sinkhorn_iters = 0;
  float hc_eps = 0;
  float norm_eps = 0;
};

struct V4HcScratch {
  std::vector<float> mixes, post, comb;  // [T, (2+hc)*hc], [T, hc], [T, hc*hc]
};

// pre/post/comb of T tokens; writes the collapsed sublayer input `collapsed` [T, hidden] and
// keeps post/comb in `s` for v4_hc_post.
void v4_hc_pre(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t T,
               float* collapsed, V4HcScratch& s, ForwardContext& ctx);
// The two halves of v4_hc_pre, for DeepSeek-V4.1, which collapses a site's input with the
// PREVIOUS site's pre: pre [T, hc] written, post/comb kept in `s`; and
// collapsed[t] = sum_i pre[t][i] * X[t][i].
void v4_hc_mixes(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t T,
                 float* pre, V4HcScratch& s, ForwardContext& ctx);
void v4_hc_collapse(const V4HcDims& d, const float* x, const float* pre, int64_t T,
                    float* collapsed);
// X[t] = post * out[t] + comb^T X[t], in place.
void v4_hc_post(const V4HcDims& d, const V4HcScratch& s, const float* out, int64_t T, float* x);
// Final collapse of `rows` tokens (x row r at x + r * x_stride) into y [rows, hidden].
void v4_hc_head(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t rows,
                int64_t x_stride, float* y, ForwardContext& ctx);

// The comb matrix of one token from its raw logits m [hc*hc] (row i, column j): softmax over j,
// + eps, column-normalize, then iters-1 rounds of row and column normalization. In place.
void v4_sinkhorn(float* comb, int hc, int iters, float eps);

}  // namespace deepinfer::model
