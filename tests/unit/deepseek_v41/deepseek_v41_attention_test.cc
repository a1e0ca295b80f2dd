// V4.1's attention per layer against the reference (expected.json "hc_sites" of the 5-token
// prompt: attn_in -> attn_result) at layers 0 and 1 (window only), 2 (KV and index source,
// ratio 2), 5 (KV source, ratio 1, the candidate source) and 7 (reads 5's entries, selects within
// its candidate blocks), through paged state rows: in one chunk, in two chunks split inside a
// ratio-2 window, and one token at a time.
#include "deepinfer/model/deepseek_v41_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v41_state.h"
#include "deepinfer/model/format/safetensors.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

std::vector<float> rows_of(const nlohmann::json& m) {
  std::vector<float> out;
  for (const auto& row : m)
    for (const auto& v : row) out.push_back(v.get<float>());
  return out;
}

// One block and one recent slab per layer hold the whole prompt.
struct Pools {
  static constexpr int kBlockSize = 8;
  std::vector<std::vector<float>> blocks, recent;
  std::vector<model::V4LayerCache> caches;
  explicit Pools(const model::DeepseekV41Config& c) {
    for (int l = 0; l < c.num_layers; ++l) {
      const model::V4StateLayout lay = model::v41_state_layout(c, l, kBlockSize);
      blocks.emplace_back(std::max<int64_t>(lay.block_floats, 1), NAN);
      recent.emplace_back(kBlockSize * lay.recent_floats, NAN);
    }
    for (int l = 0; l < c.num_layers; ++l)
      caches.push_back({blocks[l].data(), recent[l].data(), kBlockSize,
                        model::v41_state_layout(c, l, kBlockSize)});
  }
};

ForwardBatch chunk_batch(const std::vector<int32_t>& ids, int64_t begin, int64_t end) {
  ForwardBatch b;
  for (int64_t t = begin; t < end; ++t) {
    b.token_ids.push_back(ids[t]);
    b.positions.push_back(static_cast<int32_t>(t));
  }
  b.seq_token_start = {0, static_cast<int32_t>(end - begin)};
  b.seq_context_len = {static_cast<int32_t>(end)};
  b.block_table_indptr = {0, 1};
  b.block_table = {0};
  b.recent_slab_table = {0};
  return b;
}

class DeepseekV41Attention : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = v41test::fixture_dir();
    auto cfg = model::deepseek_v41_config_from_json(dir + "/config.json");
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
    cfg_ = *cfg;
    auto layout = model::engram_hash_layout(cfg_, dir + "/engram_hash.json");
    ASSERT_TRUE(layout.is_ok()) << layout.status().message();
    auto st = format::SafetensorsModel::open(dir);
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    model::WeightSource source;
    source.safetensors = *st;
    source.description = dir;
    auto weights = model::load_deepseek_v41_weights(cfg_, *layout, source);
    ASSERT_TRUE(weights.is_ok()) << weights.status().message();
    w_ = std::move(*weights);
    expected_ = v41test::read_json(dir + "/expected.json")["cases"][0];
  }

  // Runs layers 0, 1, 2, 5, 7 chunk by chunk ({0, c1, c2, ..., T}), each from the reference's
  // attention input; returns the worst difference from the reference's result per layer.
  std::vector<float> run(const std::vector<int64_t>& cuts) {
    ThreadPool pool(2);
    model::ForwardContext ctx{&pool, false};
    const std::vector<int32_t> ids = expected_["ids"].get<std::vector<int32_t>>();
    const int64_t H = cfg_.hidden;
    Pools pools(cfg_);
    model::V41Picks picks;
    model::V41AttnScratch scratch;
    const std::vector<int> layers = {0, 1, 2, 5, 7};
    std::vector<float> worst(layers.size(), 0.0f);
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const ForwardBatch b = chunk_batch(ids, cuts[k], cuts[k + 1]);
      const int64_t T = b.num_tokens();
      model::v41_picks_reset(picks);
      for (size_t i = 0; i < layers.size(); ++i) {
        const int l = layers[i];
        const nlohmann::json& site = expected_["hc_sites"][std::to_string(l)];
        const std::vector<float> in = rows_of(site["attn_in"]), want = rows_of(site["attn_result"]);
        std::vector<float> out(T * H, NAN);
        const int src = cfg_.layers[l].kv_source;
        model::v41_attention_forward(cfg_, l, w_.layers[l].attn, b, in.data() + cuts[k] * H,
                                     pools.caches[l], pools.caches[src < 0 ? l : src], picks,
                                     scratch, ctx, out.data());
        for (int64_t j = 0; j < T * H; ++j)
          worst[i] =
              std::max(worst[i], std::isfinite(out[j]) ? std::fabs(out[j] - want[cuts[k] * H + j])
                                                       : INFINITY);
      }
    }
    return worst;
  }

  model::DeepseekV41Config cfg_;
  model::V41Weights w_;
  nlohmann::json expected_;
};

TEST_F(DeepseekV41Attention, MatchesTheReferenceInOneChunk) {
  const std::vector<float> worst = run({0, 5});
  const std::vector<int> layers = {0, 1, 2, 5, 7};
  for (size_t i = 0; i < layers.size(); ++i) EXPECT_LT(worst[i], 1e-4f) << "layer " << layers[i];
}

TEST_F(DeepseekV41Attention, MatchesTheReferenceInTwoChunksAndTokenByToken) {
  const std::vector<int> layers = {0, 1, 2, 5, 7};
  for (const std::vector<int64_t>& cuts :
       {std::vector<int64_t>{0, 3, 5}, std::vector<int64_t>{0, 1, 2, 3, 4, 5}}) {
    const std::vector<float> worst = run(cuts);
    for (size_t i = 0; i < layers.size(); ++i)
      EXPECT_LT(worst[i], 1e-4f) << "layer " << layers[i] << ", " << cuts.size() - 1 << " chunks";
  }
}

}  // namespace
}  // namespace deepinfer
