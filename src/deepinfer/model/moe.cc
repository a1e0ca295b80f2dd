// DeepSeekMoE: V3 routing (sigmoid, selection bias, group-limited top-k) and the grouped expert
// compute, split over threads by matmul rows (prefill) or by whole experts (decode).
#include "deepinfer/model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>

namespace deepinfer::model {
namespace {

// Below this many rows per active expert, experts run whole on separate threads instead of
// each expert's matmuls being split over all threads.
constexpr int64_t kMinRowsPerExpertForSplit = 16;

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Indices of the k largest values, largest first; ties go to the lower index.
void top_k_indices(const float* v, int n, int k, int* out) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy(order.begin(), order.begin() + k, out);
}

}  // namespace

void ExpertStats::init(int num_layers, int num_experts) {
  num_layers_ = num_layers;
  num_experts_ = num_experts;
  counts_.assign(size_t(num_layers) * num_experts, 0);
}

void ExpertStats::reset() { std::fill(counts_.begin(), counts_.end(), 0); }

void moe_route(const MoeRouting& r, const float* logits, const float* bias, int64_t T, int32_t* idx, float* w) {
  const int E = r.n_experts, gsize = E / r.n_group;
  std::vector<float> scores(E), choice(E), group_score(r.n_group);
  std::vector<int> groups(r.topk_group), picked(r.top_k), top2(2);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) {
      scores[e] = 1.0f / (1.0f + std::exp(-logits[t * E + e]));
      choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
    }
    if (r.n_group > 1) {
      const int pick = std::min(2, gsize);
      for (int g = 0; g < r.n_group; ++g) {
        top_k_indices(choice.data() + g * gsize, gsize, pick, top2.data());
        group_score[g] = 0.0f;
        for (int i = 0; i < pick; ++i) group_score[g] += choice[g * gsize + top2[i]];
      }
      top_k_indices(group_score.data(), r.n_group, r.topk_group, groups.data());
      std::vector<bool> keep(r.n_group, false);
      for (int g : groups) keep[g] = true;
      for (int e = 0; e < E; ++e)
        if (!keep[e / gsize]) choice[e] = kNegInf;
    }
    top_k_indices(choice.data(), E, r.top_k, picked.data());
    float sum = 0.0f;
    for (int k = 0; k < r.top_k; ++k) {
      idx[t * r.top_k + k] = picked[k];
      w[t * r.top_k + k] = scores[picked[k]];
      sum += scores[picked[k]];
    }
    const float scale = r.norm_topk_prob ? r.routed_scaling_factor / (sum + 1e-20f) : r.routed_scaling_factor;
    for (int k = 0; k < r.top_k; ++k) w[t * r.top_k + k] *= scale;
  }
}

void mlp_forward(const MlpWeights& m, const float* x, int64_t rows, int64_t hidden, float* out, MoeScratch& s,
                 ForwardContext& ctx) {
  const int64_t I = m.gate.n_out();
  grow(s.gate, rows * I);
  grow(s.up, rows * I);
  swiglu_mlp_forward(m, x, rows, hidden, out, s.gate.data(), s.up.data(), ctx);
}

void moe_forward(const MoeWeights& m, const MoeRouting& r, const float* x, int64_t T, int64_t hidden, float* out,
                 uint64_t* counts, MoeScratch& s, ForwardContext& ctx) {
  const int E = r.n_experts, K = r.top_k;
  grow(s.logits, T * E);
  grow(s.idx, T * K);
  grow(s.weights, T * K);
  LinearWeight router;
  router.weight = m.router;
  linear_forward(router, x, T, hidden, s.logits.data(), E, ctx);
  moe_route(r, s.logits.data(), m.score_bias.empty() ? nullptr : static_cast<const float*>(m.score_bias.data),
            T, s.idx.data(), s.weights.data());

  // Group the (token, choice) pairs by expert: offsets[e]..offsets[e+1] into `order`.
  std::vector<int64_t> offsets(E + 1, 0);
  for (int64_t i = 0; i < T * K; ++i) ++offsets[s.idx[i] + 1];
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  std::vector<int64_t> order(T * K), fill(offsets.begin(), offsets.end() - 1);
  for (int64_t i = 0; i < T * K; ++i) order[fill[s.idx[i]]++] = i;
  if (counts)
    for (int e = 0; e < E; ++e) counts[e] += static_cast<uint64_t>(offsets[e + 1] - offsets[e]);

  grow(s.xs, T * K * hidden);
  grow(s.ys, T * K * hidden);
  for (int64_t j = 0; j < T * K; ++j)
    std::memcpy(s.xs.data() + j * hidden, x + (order[j] / K) * hidden, sizeof(float) * hidden);
  std::fill(out, out + T * hidden, 0.0f);
  std::vector<int> active;
  for (int e = 0; e < E; ++e)
    if (offsets[e + 1] > offsets[e]) active.push_back(e);
  const int nt = ctx.pool->num_threads();
  const int64_t n_active = static_cast<int64_t>(active.size());
  if (nt > 1 && (n_active >= 2 * nt || T * K < kMinRowsPerExpertForSplit * n_active)) {
    // Enough experts to go round (or too few rows each to split a matmul): whole experts per
    // thread, balanced by rows (largest first onto the least loaded thread), one pool hand-off.
    std::vector<int> by_rows = active;
    std::stable_sort(by_rows.begin(), by_rows.end(), [&](int a, int b) {
      return offsets[a + 1] - offsets[a] > offsets[b + 1] - offsets[b];
    });
    std::vector<std::vector<int>> assigned(nt);
    std::vector<int64_t> load(nt, 0);
    for (int e : by_rows) {
      const int t = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      assigned[t].push_back(e);
      load[t] += offsets[e + 1] - offsets[e];
    }
    if (static_cast<int>(s.per_thread.size()) < nt) s.per_thread.resize(nt);
    ctx.pool->run([&](int ti, int) {
      ForwardContext serial = ctx;
      serial.pool = &inline_pool();
      serial.batch_invariant = true;  // our own kernels: no BLAS calls (and its threads) in here
      for (int e : assigned[ti]) {
        const int64_t j0 = offsets[e];
        mlp_forward(m.experts[e], s.xs.data() + j0 * hidden, offsets[e + 1] - j0, hidden,
                    s.ys.data() + j0 * hidden, s.per_thread[ti], serial);
      }
    });
  } else {
    for (int e : active) {
      const int64_t j0 = offsets[e];
      mlp_forward(m.experts[e], s.xs.data() + j0 * hidden, offsets[e + 1] - j0, hidden, s.ys.data() + j0 * hidden,
                  s, ctx);
    }
  }
  // Experts in ascending order, so each token sums its experts in the reference's order.
  for (int e : active) {
    const int64_t n = offsets[e + 1] - offsets[e];
    const int64_t j0 = offsets[e];
    for (int64_t j = j0; j < j0 + n; ++j) {
      const float wt = s.weights[order[j]];
      float* o = out + (order[j] / K) * hidden;
      const float* y = s.ys.data() + j * hidden;
      for (int64_t c = 0; c < hidden; ++c) o[c] += wt * y[c];
    }
  }
  if (!m.shared.gate.weight.empty()) {
    mlp_forward(m.shared, x, T, hidden, s.ys.data(), s, ctx);
    for (int64_t i = 0; i < T * hidden; ++i) out[i] += s.ys[i];
  }
}

void skew_router(MoeWeights& m, int n_experts, int layer, float alpha) {
  if (alpha == 0.0f) return;
  std::vector<int> rank(n_experts);
  std::iota(rank.begin(), rank.end(), 0);
  std::mt19937 rng(static_cast<uint32_t>(layer) + 1);  // a fixed engine: the same skew on every machine
  for (int i = n_experts - 1; i > 0; --i) std::swap(rank[i], rank[rng() % uint32_t(i + 1)]);
  auto bias = std::shared_ptr<float[]>(new float[n_experts]);
  for (int e = 0; e < n_experts; ++e) {
    const float old = m.score_bias.empty() ? 0.0f : static_cast<const float*>(m.score_bias.data)[e];
    bias[e] = old - alpha * std::log(1.0f + static_cast<float>(rank[e]));
  }
  Tensor t;
  t.dtype = DType::kF32;
  t.ndim = 1;
  t.shape[0] = n_experts;
  t.data = bias.get();
  t.owner = bias;
  m.score_bias = t;
}

Result<MlpWeights> load_mlp(const DeepseekWeights& w, const std::string& prefix, int64_t hidden,
                            int64_t intermediate) {
  MlpWeights m;
  DI_ASSIGN_OR_RETURN(m.gate, w.linear(prefix + ".gate_proj", intermediate, hidden));
  DI_ASSIGN_OR_RETURN(m.up, w.linear(prefix + ".up_proj", intermediate, hidden));
  DI_ASSIGN_OR_RETURN(m.down, w.linear(prefix + ".down_proj", hidden, intermediate));
  return m;
}

Result<MoeWeights> load_moe(const DeepseekWeights& w, const std::string& prefix, const MoeRouting& r,
                            int64_t hidden, int64_t moe_intermediate, int n_shared) {
  MoeWeights m;
  DI_ASSIGN_OR_RETURN(m.router, w.get_f32(prefix + ".gate.weight", {r.n_experts, hidden}));
  if (w.has(prefix + ".gate.e_score_correction_bias")) {
    DI_ASSIGN_OR_RETURN(m.score_bias, w.get_f32(prefix + ".gate.e_score_correction_bias", {r.n_experts}));
  }
  m.experts.resize(r.n_experts);
  for (int e = 0; e < r.n_experts; ++e) {
    DI_ASSIGN_OR_RETURN(m.experts[e],
                        load_mlp(w, prefix + ".experts." + std::to_string(e), hidden, moe_intermediate));
  }
  if (n_shared > 0) {
    DI_ASSIGN_OR_RETURN(m.shared, load_mlp(w, prefix + ".shared_experts", hidden, moe_intermediate * n_shared));
  }
  return m;
}

}  // namespace deepinfer::model
