// V4.1's router (V4's v4_route with gate_temp) against the reference: the experts and weights
// chosen for the FFN inputs of layers 0, 1, 2 and 7 of the fixture's 5-token prompt
// (expected.json "hc_sites"), and gate_temp really changes them.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v41_config.h"
#include "deepinfer/model/deepseek_v4_moe.h"
#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/layers/linear.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

// Experts ascending with their weights, per token.
void sort_choices(int64_t T, int K, std::vector<int32_t>& idx, std::vector<float>& w) {
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int> order(K);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return idx[t * K + a] < idx[t * K + b]; });
    std::vector<int32_t> i2(K);
    std::vector<float> w2(K);
    for (int k = 0; k < K; ++k) i2[k] = idx[t * K + order[k]], w2[k] = w[t * K + order[k]];
    std::copy(i2.begin(), i2.end(), idx.begin() + t * K);
    std::copy(w2.begin(), w2.end(), w.begin() + t * K);
  }
}

TEST(DeepseekV41Router, ChoicesMatchTheReference) {
  auto cfg = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  auto st = format::SafetensorsModel::open(v41test::fixture_dir());
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  model::WeightSource source;
  source.safetensors = *st;
  source.description = v41test::fixture_dir();
  const model::V4Names names(source);
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const nlohmann::json& c = expected["cases"][0];
  const int64_t T = static_cast<int64_t>(c["ids"].size()), H = cfg->hidden;
  const int E = cfg->n_experts, K = cfg->top_k;
  model::V4MoeDims d;
  d.n_experts = E;
  d.top_k = K;
  d.routed_scaling = cfg->routed_scaling;
  d.hidden = H;
  d.gate_temp = cfg->gate_temp;
  int changed_by_temp = 0;
  for (int layer : {0, 1, 2, cfg->num_layers - 1}) {
    const std::string p = "layers." + std::to_string(layer) + ".ffn.gate.";
    model::V4Moe m;
    auto gate = names.get_f32(p + "weight", {E, H});
    auto bias = names.get_f32(p + "bias", {E});
    ASSERT_TRUE(gate.is_ok() && bias.is_ok());
    m.gate = *gate;
    m.bias = *bias;
    const nlohmann::json& s = c["hc_sites"][std::to_string(layer)];
    std::vector<float> x;
    for (const auto& row : s["ffn_in"])
      for (const auto& v : row) x.push_back(v.get<float>());
    model::LinearWeight g;
    g.weight = m.gate;
    std::vector<float> logits(T * E), w(T * K), w1(T * K);
    std::vector<int32_t> idx(T * K), idx1(T * K);
    model::linear_forward(g, x.data(), T, H, logits.data(), E, ctx);
    model::v4_route(d, m, logits.data(), nullptr, T, idx.data(), w.data());
    sort_choices(T, K, idx, w);
    for (int64_t t = 0; t < T; ++t)
      for (int k = 0; k < K; ++k) {
        EXPECT_EQ(idx[t * K + k], s["router_idx"][t][k].get<int32_t>())
            << "layer " << layer << " token " << t;
        EXPECT_NEAR(w[t * K + k], s["router_weights"][t][k].get<float>(), 1e-4)
            << "layer " << layer;
      }
    model::V4MoeDims v4 = d;
    v4.gate_temp = 1.0f;
    model::v4_route(v4, m, logits.data(), nullptr, T, idx1.data(), w1.data());
    sort_choices(T, K, idx1, w1);
    for (int64_t i = 0; i < T * K; ++i) changed_by_temp += std::fabs(w1[i] - w[i]) > 1e-3f;
  }
  EXPECT_GT(changed_by_temp, 0);
}

}  // namespace
}  // namespace deepinfer
