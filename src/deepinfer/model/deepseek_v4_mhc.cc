// mHC, scalar apart from the fn projection (one matmul over the flattened streams).
#include "deepinfer/model/deepseek_v4_mhc.h"

#include <cmath>
#include <cstring>

namespace deepinfer::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// mixes[t] = (fn . X[t]) * rsqrt(mean(X[t]^2) + eps), X[t] flattened to hc * hidden.
void mixes_of(const V4HcDims& d, const Tensor& fn, const float* x, int64_t T, float* mixes,
              ForwardContext& ctx) {
  const int64_t flat = d.hc * d.hidden, m = fn.shape[0];
  LinearWeight lw;
  lw.weight = fn;
  linear_forward(lw, x, T, flat, mixes, m, ctx);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < flat; ++i) ss += double(x[t * flat + i]) * x[t * flat + i];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / double(flat) + d.norm_eps));
    for (int64_t i = 0; i < m; ++i) mixes[t * m + i] *= r;
  }
}

}  // namespace

void v4_sinkhorn(float* comb, int hc, int iters, float eps) {
  for (int i = 0; i < hc; ++i) {
    float* row = comb + i * hc;
    float mx = row[0];
    for (int j = 1; j < hc; ++j) mx = std::max(mx, row[j]);
    float sum = 0;
    for (int j = 0; j < hc; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int j = 0; j < hc; ++j) row[j] = row[j] / sum + eps;
  }
  auto norm_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      float sum = 0;
      for (int i = 0; i < hc; ++i) sum += comb[i * hc + j];
      for (int i = 0; i < hc; ++i) comb[i * hc + j] /= sum + eps;
    }
  };
  norm_cols();
  for (int it = 1; it < iters; ++it) {
    for (int i = 0; i < hc; ++i) {
      float sum = 0;
      for (int j = 0; j < hc; ++j) sum += comb[i * hc + j];
      for (int j = 0; j < hc; ++j) comb[i * hc + j] /= sum + eps;
    }
    norm_cols();
  }
}

void v4_hc_mixes(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t T,
                 float* pre, V4HcScratch& s, ForwardContext& ctx) {
  const int hc = d.hc;
  const int64_t m = int64_t{2 + hc} * hc;
  s.mixes.resize(T * m);
  s.post.resize(T * hc);
  s.comb.resize(T * hc * hc);
  mixes_of(d, w.fn, x, T, s.mixes.data(), ctx);
  const auto* base = static_cast<const float*>(w.base.data);
  const auto* scale = static_cast<const float*>(w.scale.data);
  for (int64_t t = 0; t < T; ++t) {
    const float* mx = s.mixes.data() + t * m;
    for (int i = 0; i < hc; ++i) {
      pre[t * hc + i] = sigmoid(mx[i] * scale[0] + base[i]) + d.hc_eps;
      s.post[t * hc + i] = 2.0f * sigmoid(mx[hc + i] * scale[1] + base[hc + i]);
    }
    float* comb = s.comb.data() + t * hc * hc;
    for (int k = 0; k < hc * hc; ++k) comb[k] = mx[2 * hc + k] * scale[2] + base[2 * hc + k];
    v4_sinkhorn(comb, hc, d.sinkhorn_iters, d.hc_eps);
  }
}

void v4_hc_collapse(const V4HcDims& d, const float* x, const float* pre, int64_t T,
                    float* collapsed) {
  const int hc = d.hc;
  const int64_t H = d.hidden;
  for (int64_t t = 0; t < T; ++t) {
    float* y = collapsed + t * H;
    const float* xs = x + t * hc * H;
    for (int64_t c = 0; c < H; ++c) {
      float acc = 0;
      for (int i = 0; i < hc; ++i) acc += pre[t * hc + i] * xs[i * H + c];
      y[c] = acc;
    }
  }
}

void v4_hc_pre(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t T,
               float* collapsed, V4HcScratch& s, ForwardContext& ctx) {
  std::vector<float> pre(T * d.hc);
  v4_hc_mixes(d, w, x, T, pre.data(), s, ctx);
  v4_hc_collapse(d, x, pre.data(), T, collapsed);
}

void v4_hc_post(const V4HcDims& d, const V4HcScratch& s, const float* out, int64_t T, float* x) {
  const int hc = d.hc;
  const int64_t H = d.hidden;
  std::vector<float> old(hc * H);
  for (int64_t t = 0; t < T; ++t) {
    float* xs = x + t * hc * H;
    std::memcpy(old.data(), xs, sizeof(float) * hc * H);
    const float* comb = s.comb.data() + t * hc * hc;
    const float* post = s.post.data() + t * hc;
    for (int k = 0; k < hc; ++k)
      for (int64_t c = 0; c < H; ++c) {
        float acc = post[k] * out[t * H + c];
        for (int j = 0; j < hc; ++j) acc += comb[j * hc + k] * old[j * H + c];
        xs[k * H + c] = acc;
      }
  }
}

void v4_hc_head(const V4HcDims& d, const V4HyperConnection& w, const float* x, int64_t rows,
                int64_t x_stride, float* y, ForwardContext& ctx) {
  const int hc = d.hc;
  const int64_t H = d.hidden;
  std::vector<float> flat(rows * hc * H), mixes(rows * hc);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(flat.data() + r * hc * H, x + r * x_stride, sizeof(float) * hc * H);
  mixes_of(d, w.fn, flat.data(), rows, mixes.data(), ctx);
  const auto* base = static_cast<const float*>(w.base.data);
  const float scale = static_cast<const float*>(w.scale.data)[0];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < H; ++c) y[r * H + c] = 0;
    for (int i = 0; i < hc; ++i) {
      const float pre = sigmoid(mixes[r * hc + i] * scale + base[i]) + d.hc_eps;
      for (int64_t c = 0; c < H; ++c) y[r * H + c] += pre * flat[(r * hc + i) * H + c];
    }
  }
}

}  // namespace deepinfer::model
