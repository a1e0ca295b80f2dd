// The V4.1 weights loader on the tiny fixture: each layer holds the tensors its roles imply (and
// the checkpoint's tensors a config gives no use are refused, as are missing ones, by name), and
// V4's MoE on the loaded weights (FP4 routed experts, FP8 32x32 shared expert) gives the
// reference's FFN outputs at layers 0, 1, 2 and 7 of the 5-token prompt (expected.json
// "hc_sites" ffn_in -> ffn_result).
#include "deepinfer/model/deepseek_v41_weights.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v41_linear.h"
#include "deepinfer/model/deepseek_v4_moe.h"
#include "deepinfer/model/deepseek_v4_names.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/layers/linear.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

struct Loaded {
  std::shared_ptr<format::SafetensorsModel> st;
  model::WeightSource source;
  std::optional<model::DeepseekV41Config> cfg = {};
  std::optional<model::EngramHashLayout> layout = {};
  std::optional<Result<model::V41Weights>> result = {};
};

void load(const std::string& dir, Loaded& out) {
  auto st = format::SafetensorsModel::open(dir);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  out.st = *st;
  out.source.safetensors = out.st;
  out.source.description = dir;
  auto cfg = model::deepseek_v41_config_from_json(dir + "/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  out.cfg = *cfg;
  auto layout = model::engram_hash_layout(*out.cfg, dir + "/engram_hash.json");
  ASSERT_TRUE(layout.is_ok()) << layout.status().message();
  out.layout = *layout;
  out.result = model::load_deepseek_v41_weights(*out.cfg, *out.layout, out.source);
}

bool present(const model::LinearWeight& w) { return w.weight.data != nullptr; }

TEST(DeepseekV41Weights, EachLayerHoldsWhatItsRolesImply) {
  Loaded l;
  load(v41test::fixture_dir(), l);
  ASSERT_TRUE(l.result->is_ok()) << l.result->status().message();
  const model::V41Weights& w = **l.result;
  ASSERT_EQ(w.layers.size(), 8u);
  EXPECT_EQ(w.embed.shape[0], 128);
  EXPECT_EQ(w.norm.dtype, DType::kF32);
  for (int i = 0; i < 8; ++i) {
    const model::V41LayerWeights& L = w.layers[i];
    const bool source = i == 2 || i == 5, index = i == 2 || i == 5 || i == 7;
    EXPECT_EQ(L.attn.wq_a.fp8_block, 32) << i;
    EXPECT_EQ(L.attn.wq_a.weight.dtype, DType::kF8_E4M3) << i;
    EXPECT_EQ(L.attn.sinks.shape[0], 4) << i;
    EXPECT_EQ(L.moe.fp4_experts.size(), 4u) << i;
    EXPECT_TRUE(L.moe.experts.empty()) << i;
    EXPECT_EQ(L.moe.shared.gate.fp8_block, 32) << i;
    EXPECT_EQ(present(L.attn.compressor.wkv), source) << i;
    EXPECT_EQ(present(L.attn.compressor.wgate), i == 2) << i;  // ratio 2 source only
    EXPECT_EQ(present(L.attn.indexer.wq_b), index) << i;
    EXPECT_EQ(present(L.attn.indexer.wk), source) << i;  // keys only where the latent is made
    EXPECT_EQ(L.has_engram, i == 1 || i == 4) << i;
  }
  EXPECT_EQ(w.layers[7].attn.indexer.k_norm.data, nullptr);
  // wo_a's 32x32 FP8 blocks straddle its two groups of 16 rows: widened to f32 at load, equal to
  // the dequantized checkpoint tensor.
  const model::V4Names names(l.source);
  auto fp8 = model::load_v41_linear(names, "layers.3.attn.wo_a", 32, 64, 32);
  ASSERT_TRUE(fp8.is_ok()) << fp8.status().message();
  ASSERT_EQ(fp8->weight.dtype, DType::kF8_E4M3);
  auto want = model::linear_to_f32(*fp8, "wo_a");
  ASSERT_TRUE(want.is_ok());
  const model::LinearWeight& wo_a = w.layers[3].attn.wo_a;
  ASSERT_EQ(wo_a.weight.dtype, DType::kF32);
  ASSERT_EQ(wo_a.n_out(), 32);
  ASSERT_EQ(wo_a.n_in(), 64);
  const auto* got = static_cast<const float*>(wo_a.weight.data);
  for (size_t i = 0; i < want->size(); ++i) ASSERT_EQ(got[i], (*want)[i]) << i;
  EXPECT_EQ(w.layers[3].attn.wo_b.weight.dtype, DType::kF8_E4M3);  // not grouped: stays FP8
  EXPECT_EQ(w.layers[2].attn.indexer.k_norm.shape[0], 16);
}

TEST(DeepseekV41Weights, RefusesTensorsTheConfigDisagreesWith) {
  {  // layer 6 made an index source: its indexer tensors are missing
    v41test::EditedCopy d(
        "weights_missing",
        [](nlohmann::json& c) {
          c["text_config"]["index_source_layer_ids"] = {2, 5, 6, 7};
        },
        v41test::no_edit);
    Loaded l;
    load(d.dir.string(), l);
    ASSERT_FALSE(l.result->is_ok());
    EXPECT_NE(
        l.result->status().message().find("missing tensor 'layers.6.attn.indexer.wq_b.weight'"),
        std::string::npos)
        << l.result->status().message();
  }
  {  // layer 7 no longer an index source: its indexer tensors have no use
    v41test::EditedCopy d(
        "weights_unused",
        [](nlohmann::json& c) {
          c["text_config"]["index_source_layer_ids"] = {2, 5};
        },
        v41test::no_edit);
    Loaded l;
    load(d.dir.string(), l);
    ASSERT_FALSE(l.result->is_ok());
    EXPECT_NE(l.result->status().message().find("'layers.7.attn.indexer.wq_b.weight' is present"),
              std::string::npos)
        << l.result->status().message();
  }
}

TEST(DeepseekV41Weights, MoeOnTheLoadedWeightsMatchesTheReference) {
  Loaded l;
  load(v41test::fixture_dir(), l);
  ASSERT_TRUE(l.result->is_ok()) << l.result->status().message();
  const model::DeepseekV41Config& cfg = *l.cfg;
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  model::V4MoeDims d;
  d.n_experts = cfg.n_experts;
  d.top_k = cfg.top_k;
  d.routed_scaling = cfg.routed_scaling;
  d.swiglu_limit = cfg.swiglu_limit;
  d.hidden = cfg.hidden;
  d.gate_temp = cfg.gate_temp;
  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const nlohmann::json& c = expected["cases"][0];
  const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
  const int64_t T = static_cast<int64_t>(ids.size()), H = cfg.hidden;
  for (int layer : {0, 1, 2, 7}) {
    const nlohmann::json& s = c["hc_sites"][std::to_string(layer)];
    std::vector<float> x, want;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < H; ++i) {
        x.push_back(s["ffn_in"][t][i].get<float>());
        want.push_back(s["ffn_result"][t][i].get<float>());
      }
    std::vector<float> out(T * H);
    std::vector<uint64_t> counts(cfg.n_experts, 0);
    model::V4MoeScratch scratch;
    model::v4_moe_forward(d, (*l.result)->layers[layer].moe, x.data(), ids.data(), T, out.data(),
                          counts.data(), scratch, ctx);
    float worst = 0, scale = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i])) << "layer " << layer;
      worst = std::max(worst, std::fabs(out[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
    EXPECT_LT(worst, 1e-4f * std::max(1.0f, scale)) << "layer " << layer;
    EXPECT_GT(scale, 0.01f) << "layer " << layer << ": the output must be non-trivial";
    uint64_t routed = 0;
    for (uint64_t n : counts) routed += n;
    EXPECT_EQ(routed, static_cast<uint64_t>(T * cfg.top_k));
  }
}

}  // namespace
}  // namespace deepinfer
