// V4.1's compressor (V4's, without ape; ratio 1 without wgate) and the indexer keys made from its
// pre-RoPE entries, against the reference at the KV sources of the fixture's 5-token prompt:
// layer 2 (ratio 2) and layer 5 (ratio 1), from their attention inputs (expected.json "hc_sites"
// attn_in -> compressed, index_keys). The tokens arrive in two chunks split inside a ratio-2
// window.
#include "deepinfer/model/deepseek_v41_compressor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v41_weights.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/layers/linear.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

std::vector<float> rows_of(const nlohmann::json& m) {
  std::vector<float> out;
  for (const auto& row : m)
    for (const auto& v : row) out.push_back(v.get<float>());
  return out;
}

TEST(DeepseekV41Compressor, EntriesAndIndexKeysMatchTheReference) {
  const std::string dir = v41test::fixture_dir();
  auto cfg = model::deepseek_v41_config_from_json(dir + "/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  auto layout = model::engram_hash_layout(*cfg, dir + "/engram_hash.json");
  ASSERT_TRUE(layout.is_ok()) << layout.status().message();
  auto st = format::SafetensorsModel::open(dir);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  model::WeightSource source;
  source.safetensors = *st;
  source.description = dir;
  auto weights = model::load_deepseek_v41_weights(*cfg, *layout, source);
  ASSERT_TRUE(weights.is_ok()) << weights.status().message();
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};
  const nlohmann::json expected = v41test::read_json(dir + "/expected.json");
  const nlohmann::json& c = expected["cases"][0];
  const int64_t T = static_cast<int64_t>(c["ids"].size()), H = cfg->hidden, D = cfg->head_dim,
                Dk = cfg->index_head_dim;
  for (int layer : {2, 5}) {
    const nlohmann::json& s = c["hc_sites"][std::to_string(layer)];
    const model::V41Attention& w = weights->layers[layer].attn;
    const int ratio = cfg->layers[layer].ratio;
    ASSERT_EQ(ratio, layer == 2 ? 2 : 1);
    const std::vector<float> x = rows_of(s["attn_in"]), want = rows_of(s["compressed"]),
                             want_keys = rows_of(s["index_keys"]);
    const int64_t n = T / ratio;
    ASSERT_EQ(want.size(), static_cast<size_t>(n * D));
    ASSERT_EQ(want_keys.size(), static_cast<size_t>(n * Dk));

    model::V4CompressorDims d = model::v41_compressor_dims(*cfg, ratio);
    d.kv_off = 0;
    d.score_off = D;
    d.entry_off = 0;
    const int block_size = 8;  // one block and one slab hold the whole prompt
    std::vector<float> blocks(block_size / ratio * D, NAN), recent(block_size * 2 * D, NAN);
    const int32_t block_ids[1] = {0}, slab_ids[1] = {0};
    model::V4SeqState state;
    state.block_pool = blocks.data();
    state.recent_pool = recent.data();
    state.blocks = block_ids;
    state.slabs = slab_ids;
    state.n_blocks = 1;
    state.block_size = block_size;
    state.block_floats = block_size / ratio * D;
    state.recent_floats = 2 * D;

    std::vector<float> kv(T * D), score(T * D);
    model::linear_forward(w.compressor.wkv, x.data(), T, H, kv.data(), D, ctx);
    if (ratio > 1) model::linear_forward(w.compressor.wgate, x.data(), T, H, score.data(), D, ctx);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t);
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, T}})
      model::v4_compressor_step(d, w.compressor, state, kv.data() + begin * D,
                                ratio > 1 ? score.data() + begin * D : nullptr, pos.data() + begin,
                                end - begin);

    std::vector<float> latents(n * D), keys(n * Dk);
    std::vector<int32_t> index(n);
    float worst = 0, worst_key = 0;
    for (int64_t e = 0; e < n; ++e) {
      const float* got = state.entry(d.entry_off, D, ratio, e);
      for (int64_t i = 0; i < D; ++i) worst = std::max(worst, std::fabs(got[i] - want[e * D + i]));
      model::v4_pool_entry(d, w.compressor, state, e, latents.data() + e * D);
      index[e] = static_cast<int32_t>(e);
    }
    model::v41_index_keys(*cfg, w.indexer, ratio, latents.data(), index.data(), n, keys.data(),
                          ctx);
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(std::isfinite(keys[i])) << "layer " << layer << " key " << i;
      worst_key = std::max(worst_key, std::fabs(keys[i] - want_keys[i]));
    }
    EXPECT_LT(worst, 1e-4f) << "layer " << layer << " entries";
    EXPECT_LT(worst_key, 1e-4f) << "layer " << layer << " index keys";
  }
}

}  // namespace
}  // namespace deepinfer
