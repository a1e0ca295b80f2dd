// The Engram update of layers 1 and 4 against the reference: the fixture's 13-token prompt, the
// streams entering each Engram layer and leaving its update (expected.json "engram_streams"),
// through the checkpoint's FP8 32x32 engram.wkv and bf16 table.
#include "deepinfer/model/deepseek_v41_engram.h"

#include <cmath>

#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/format/safetensors.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

TEST(DeepseekV41Engram, UpdateMatchesTheReference) {
  auto cfg = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().message();
  auto layout = model::engram_hash_layout(*cfg, v41test::fixture_dir() + "/engram_hash.json");
  ASSERT_TRUE(layout.is_ok()) << layout.status().message();
  auto st = format::SafetensorsModel::open(v41test::fixture_dir());
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  model::WeightSource source;
  source.safetensors = *st;
  source.description = v41test::fixture_dir();
  const model::V4Names names(source);
  ThreadPool pool(2);
  model::ForwardContext ctx{&pool, false};

  const nlohmann::json expected = v41test::read_json(v41test::fixture_dir() + "/expected.json");
  const nlohmann::json& c = expected["cases"][1];
  const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
  const int64_t T = static_cast<int64_t>(ids.size()), width = cfg->hc_mult * cfg->hidden;
  for (const model::EngramLayerHash& hash : layout->layers) {
    auto w = model::load_v41_engram(names, *cfg, *layout, hash);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    EXPECT_EQ(w->wkv.fp8_block, 32);
    const nlohmann::json& s = c["engram_streams"][std::to_string(hash.layer)];
    std::vector<float> streams, want;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < width; ++i) {
        streams.push_back(s["before"][t][i].get<float>());
        want.push_back(s["after"][t][i].get<float>());
      }
    std::vector<int64_t> rows(T * layout->n_cols);
    model::engram_rows_for_sequence(*layout, hash, ids, rows);
    const std::vector<float> before = streams;
    model::v41_engram_update(*cfg, *layout, *w, rows, T, streams.data(), ctx);
    float worst = 0, moved = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
      worst = std::max(worst, std::fabs(streams[i] - want[i]));
      moved = std::max(moved, std::fabs(want[i] - before[i]));
    }
    EXPECT_LT(worst, 1e-4f) << "layer " << hash.layer;
    EXPECT_GT(moved, 0.05f) << "layer " << hash.layer
                            << ": the update must matter for the test to mean anything";
  }
}

}  // namespace
}  // namespace deepinfer
