// V4.1's mHC flow against the reference on the fixture's 5-token prompt (expected.json
// "hc_sites": layers 0, 1, 2 and 7): each sublayer input collapses with the previous site's pre
// (layer 0: one-hot on stream 0), the expansions give the traced streams, and the head's
// collapse with the last FFN site's pre (no hc_head) gives the reference's logits.
#include "deepinfer/model/deepseek_v41_mhc.h"

#include <cmath>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/layers/linear.h"
#include "deepinfer/model/layers/rms_norm.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

std::vector<float> flat(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const nlohmann::json& r : rows)
    for (const nlohmann::json& v : r) out.push_back(v.get<float>());
  return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

TEST(DeepseekV41Mhc, SitesAndHeadMatchTheReference) {
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
  const model::V4HcDims d = model::v41_hc_dims(*cfg);
  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const nlohmann::json& c = expected["cases"][0];
  const int64_t T = static_cast<int64_t>(c["ids"].size()), H = cfg->hidden, hc = cfg->hc_mult;
  constexpr float kTol = 2e-4f;  // the fixture keeps 5 decimals

  std::vector<float> prev_pre(T * hc), attn_pre(T * hc), ffn_pre(T * hc), in(T * H);
  model::v41_first_pre(static_cast<int>(hc), T, prev_pre.data());
  int prev_layer = -1;
  for (int layer : {0, 1, 2, cfg->num_layers - 1}) {
    const nlohmann::json& s = c["hc_sites"][std::to_string(layer)];
    auto attn = model::load_v41_hc_site(names, *cfg, layer, "attn");
    auto ffn = model::load_v41_hc_site(names, *cfg, layer, "ffn");
    ASSERT_TRUE(attn.is_ok() && ffn.is_ok()) << attn.status().message() << ffn.status().message();
    std::vector<float> x = flat(s["hc_in"]);
    model::V4HcScratch scratch;
    model::v41_hc_site(d, *attn, x.data(), T, prev_pre.data(), attn_pre.data(), in.data(), scratch,
                       ctx);
    if (prev_layer == layer - 1) {  // the previous site's pre is known
      EXPECT_LT(max_diff(in, flat(s["attn_in"])), kTol) << "layer " << layer << " attn_in";
      if (layer == 1) {  // V4's rule (collapse with the site's own pre) would not match
        std::vector<float> own(T * H);
        model::v4_hc_collapse(d, x.data(), attn_pre.data(), T, own.data());
        model::rms_norm_rows(own.data(), H, attn->norm, own.data(), H, T, H, d.norm_eps);
        EXPECT_GT(max_diff(own, flat(s["attn_in"])), 0.01f);
      }
    }
    model::v4_hc_post(d, scratch, flat(s["attn_result"]).data(), T, x.data());
    EXPECT_LT(max_diff(x, flat(s["after_attn"])), kTol) << "layer " << layer << " after_attn";
    model::v41_hc_site(d, *ffn, x.data(), T, attn_pre.data(), ffn_pre.data(), in.data(), scratch,
                       ctx);
    EXPECT_LT(max_diff(in, flat(s["ffn_in"])), kTol) << "layer " << layer << " ffn_in";
    model::v4_hc_post(d, scratch, flat(s["ffn_result"]).data(), T, x.data());
    EXPECT_LT(max_diff(x, flat(s["layer_out"])), kTol) << "layer " << layer << " layer_out";
    prev_pre = ffn_pre;
    prev_layer = layer;
  }
  // The head: the last layer's streams, collapsed with its FFN site's pre, normed, projected.
  auto norm = names.get_f32("norm.weight", {H});
  auto head = names.linear("head", cfg->vocab_size, H);
  ASSERT_TRUE(norm.is_ok() && head.is_ok());
  std::vector<float> x = flat(c["hc_sites"][std::to_string(cfg->num_layers - 1)]["layer_out"]);
  std::vector<float> y(T * H), logits(T * cfg->vocab_size);
  model::v41_hc_head(d, *norm, x.data(), T, prev_pre.data(), y.data());
  model::linear_forward(*head, y.data(), T, H, logits.data(), cfg->vocab_size, ctx);
  EXPECT_LT(max_diff(logits, flat(c["logits"])), 2e-3f);
}

}  // namespace
}  // namespace deepinfer
