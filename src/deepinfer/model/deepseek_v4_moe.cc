// V4 routing and the grouped expert compute (each expert's tokens gathered into one matmul).
#include "deepinfer/model/deepseek_v4_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "deepinfer/kernels/cpu/activation.h"
#include "deepinfer/kernels/cpu/fp4_matmul.h"

namespace deepinfer::model {
namespace {

// torch.nn.functional.softplus (linear above 20), then sqrt.
float sqrt_softplus(float x) { return std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x))); }

// SwiGLU with V4's clamp: down(silu(min(g, L)) * clamp(u, -L, L)).
void clamped_mlp(const MlpWeights& m, float limit, const float* x, int64_t rows, int64_t hidden,
                 float* out, V4MoeScratch& s, ForwardContext& ctx) {
  const int64_t I = m.gate.n_out();
  if (static_cast<int64_t>(s.gate.size()) < rows * I) {
    s.gate.resize(rows * I);
    s.up.resize(rows * I);
  }
  swiglu_mlp_forward(m, x, rows, hidden, out, s.gate.data(), s.up.data(), ctx, limit);
}

// out [rows, w.n_out] = x [rows, w.n_in] through a packed FP4 projection.
void fp4_linear(const V4Fp4Linear& w, const float* x, int64_t rows, float* out,
                ForwardContext& ctx) {
  kernels::Fp4MatmulParams p;
  p.weight = static_cast<const uint8_t*>(w.weight.data);
  p.weight_row_bytes = w.weight.row_stride_bytes();
  p.scale = static_cast<const uint8_t*>(w.scale.data);
  p.scale_stride = w.scale.shape[1];
  p.n_out = w.n_out;
  p.n_in = w.n_in;
  p.input = x;
  p.n_rows = rows;
  p.input_stride = w.n_in;
  p.output = out;
  p.output_stride = w.n_out;
  kernels::fp4_matmul(p, *ctx.pool);
}

// clamped_mlp for an FP4 expert: the same clamp and SwiGLU around fp4 projections.
void clamped_fp4_mlp(const V4Fp4Mlp& m, float limit, const float* x, int64_t rows, float* out,
                     V4MoeScratch& s, ForwardContext& ctx) {
  const int64_t I = m.gate.n_out;
  if (static_cast<int64_t>(s.gate.size()) < rows * I) {
    s.gate.resize(rows * I);
    s.up.resize(rows * I);
  }
  float* g = s.gate.data();
  float* u = s.up.data();
  fp4_linear(m.gate, x, rows, g, ctx);
  fp4_linear(m.up, x, rows, u, ctx);
  if (limit > 0)
    for (int64_t i = 0; i < rows * I; ++i) {
      g[i] = std::min(g[i], limit);
      u[i] = std::clamp(u[i], -limit, limit);
    }
  kernels::swiglu(g, u, g, rows * I);
  fp4_linear(m.down, g, rows, out, ctx);
}

}  // namespace

void v4_route(const V4MoeDims& d, const V4Moe& m, const float* logits, const int32_t* token_ids,
              int64_t T, int32_t* idx, float* w) {
  const int E = d.n_experts, K = d.top_k;
  const auto* bias = m.bias.empty() ? nullptr : static_cast<const float*>(m.bias.data);
  std::vector<float> s(E), choice(E);
  std::vector<int> order(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) {
      s[e] = sqrt_softplus(logits[t * E + e] / d.gate_temp);  // exact for V4's 1
      choice[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    int32_t* ix = idx + t * K;
    if (!m.tid2eid.empty()) {
      std::copy_n(m.tid2eid.data() + int64_t{token_ids[t]} * K, K, ix);
    } else {
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int a, int b) {
        return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
      });
      std::copy_n(order.begin(), K, ix);
    }
    float sum = 0;
    for (int k = 0; k < K; ++k) sum += s[ix[k]];
    for (int k = 0; k < K; ++k) w[t * K + k] = s[ix[k]] / (sum + 1e-20f) * d.routed_scaling;
  }
}

bool v4_expert_held(const V4Moe& m, int e) {
  return m.fp4_experts.empty() ? !m.experts[size_t(e)].gate.weight.empty()
                               : !m.fp4_experts[size_t(e)].gate.weight.empty();
}

void v4_expert_forward(const V4MoeDims& d, const V4Moe& m, int e, const float* x, int64_t rows,
                       float* out, V4MoeScratch& s, ForwardContext& ctx) {
  if (m.fp4_experts.empty())
    clamped_mlp(m.experts[size_t(e)], d.swiglu_limit, x, rows, d.hidden, out, s, ctx);
  else
    clamped_fp4_mlp(m.fp4_experts[size_t(e)], d.swiglu_limit, x, rows, out, s, ctx);
}

void v4_shared_forward(const V4MoeDims& d, const V4Moe& m, const float* x, int64_t T, float* out,
                       V4MoeScratch& s, ForwardContext& ctx) {
  clamped_mlp(m.shared, d.swiglu_limit, x, T, d.hidden, out, s, ctx);
}

void v4_moe_forward(const V4MoeDims& d, const V4Moe& m, const float* x, const int32_t* token_ids,
                    int64_t T, float* out, uint64_t* counts, V4MoeScratch& s, ForwardContext& ctx) {
  const int E = d.n_experts, K = d.top_k;
  const int64_t H = d.hidden;
  s.logits.resize(T * E);
  s.idx.resize(T * K);
  s.weights.resize(T * K);
  LinearWeight router;
  router.weight = m.gate;
  linear_forward(router, x, T, H, s.logits.data(), E, ctx);
  v4_route(d, m, s.logits.data(), token_ids, T, s.idx.data(), s.weights.data());
  std::fill(out, out + T * H, 0.0f);
  s.xs.resize(T * K * H);  // a hash table row may name an expert twice
  s.ys.resize(T * K * H);
  std::vector<int64_t> members;  // (token * K + k) of the current expert
  for (int e = 0; e < E; ++e) {
    members.clear();
    for (int64_t j = 0; j < T * K; ++j)
      if (s.idx[j] == e) members.push_back(j);
    if (members.empty()) continue;
    if (counts) counts[e] += members.size();
    const int64_t n = static_cast<int64_t>(members.size());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(s.xs.data() + i * H, x + (members[i] / K) * H, sizeof(float) * H);
    v4_expert_forward(d, m, e, s.xs.data(), n, s.ys.data(), s, ctx);
    for (int64_t i = 0; i < n; ++i) {
      const float wt = s.weights[members[i]];
      float* o = out + (members[i] / K) * H;
      for (int64_t c = 0; c < H; ++c) o[c] += wt * s.ys[i * H + c];
    }
  }
  v4_shared_forward(d, m, x, T, s.ys.data(), s, ctx);
  for (int64_t i = 0; i < T * H; ++i) out[i] += s.ys[i];
}

}  // namespace deepinfer::model
