// V4.1's state kinds (deepseek_v41_state.h): a window ring on every layer, compressor tails,
// entries and index keys only at the KV sources; the layout's offsets agree with the kinds the
// engine allocates; sizes on the tiny fixture and on V4.1-Flash's layer layout (tiny sizes).
#include "deepinfer/model/deepseek_v41_state.h"

#include <vector>

#include "v41_fixture.h"

namespace deepinfer {
namespace {

using model::StateKind;

TEST(DeepseekV41State, TinyFixtureKindsAndLayout) {
  auto c = model::deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const model::KvCacheSpec spec = model::v41_kv_cache_spec(*c);
  std::vector<std::string> got;
  for (const StateKind& k : spec.state_kinds)
    got.push_back(std::to_string(k.layer) + ":" + k.name + "/" + std::to_string(k.floats) + "/" +
                  std::to_string(k.tokens_per_entry) + (k.recent ? "r" : "p"));
  const std::vector<std::string> want = {
      "0:window_kv/32/1r",       "1:window_kv/32/1r",          "2:window_kv/32/1r",
      "2:compressor_tail/64/1r", "2:compressed_entries/32/2p", "2:indexer_keys/16/2p",
      "3:window_kv/32/1r",       "4:window_kv/32/1r",          "5:window_kv/32/1r",
      "5:compressor_tail/64/1r", "5:compressed_entries/32/1p", "5:indexer_keys/16/1p",
      "6:window_kv/32/1r",       "7:window_kv/32/1r",
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(spec.recent_tokens, 4);  // the window; the sources' windows are 2 and 1 tokens
  EXPECT_EQ(spec.block_size_multiple, 2);
  // Layer 2: 16 + 8 floats per token, layer 5: 32 + 16.
  EXPECT_DOUBLE_EQ(spec.paged_bytes_per_token(), 4.0 * (16 + 8 + 32 + 16));

  // Each layer's offsets cover exactly its kinds, in their order.
  const int block_size = 8;
  for (int l = 0; l < c->num_layers; ++l) {
    const model::V4StateLayout s = model::v41_state_layout(*c, l, block_size);
    int64_t recent = 0, paged = 0;
    std::vector<int64_t> recent_at, paged_at;
    for (const StateKind& k : spec.state_kinds) {
      if (k.layer != l) continue;
      if (k.recent) {
        recent_at.push_back(recent);
        recent += k.floats;
      } else {
        paged_at.push_back(paged);
        paged += k.floats * (block_size / k.tokens_per_entry);
      }
    }
    EXPECT_EQ(s.recent_floats, recent) << l;
    EXPECT_EQ(s.block_floats, paged) << l;
    EXPECT_EQ(s.kv, 0) << l;
    if (!c->layers[l].owns_compressor) {
      EXPECT_EQ(s.comp_kv, -1) << l;
      EXPECT_EQ(s.comp_entries, -1) << l;
      continue;
    }
    ASSERT_EQ(recent_at.size(), 2u) << l;
    EXPECT_EQ(s.comp_kv, recent_at[1]) << l;
    EXPECT_EQ(s.comp_score, recent_at[1] + c->head_dim) << l;
    ASSERT_EQ(paged_at.size(), 2u) << l;
    EXPECT_EQ(s.comp_entries, paged_at[0]) << l;
    EXPECT_EQ(s.idx_entries, paged_at[1]) << l;
  }
}

// V4.1-Flash's layout (DEEPSEEK_V4.md) on the fixture's sizes: 40 layers, sources [2, 8, 14, 20]
// (ratios 2, 2, 2, 1), all four also index sources.
TEST(DeepseekV41State, FlashLayoutKeepsEntriesOnlyAtTheSources) {
  v41test::EditedCopy d(
      "state_flash",
      [](nlohmann::json& cfg) {
        nlohmann::json& t = cfg["text_config"];
        std::vector<int> ratios = {0, 0};
        for (int i = 0; i < 18; ++i) ratios.push_back(2);
        for (int i = 0; i < 20; ++i) ratios.push_back(1);
        t["num_hidden_layers"] = 40;
        t["compress_ratios"] = ratios;
        t["kv_source_layer_ids"] = {2, 8, 14, 20};
        t["index_source_layer_ids"] = {2, 8, 14, 20, 24, 28, 32, 36};
        t["candidate_source_layer_id"] = 20;
        t["engram_layer_ids"] = {1, 14};
      },
      v41test::no_edit);
  auto c = model::deepseek_v41_config_from_json(d.config());
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const model::KvCacheSpec spec = model::v41_kv_cache_spec(*c);
  int windows = 0, tails = 0, entries = 0, keys = 0;
  for (const StateKind& k : spec.state_kinds) {
    windows += k.name == "window_kv";
    tails += k.name == "compressor_tail";
    entries += k.name == "compressed_entries";
    keys += k.name == "indexer_keys";
  }
  EXPECT_EQ(windows, 40);
  EXPECT_EQ(tails, 4);
  EXPECT_EQ(entries, 4);
  EXPECT_EQ(keys, 4);
  // Per token: three ratio-2 sources (16 + 8 floats each) and one ratio-1 source (32 + 16).
  EXPECT_DOUBLE_EQ(spec.paged_bytes_per_token(), 4.0 * (3 * (16 + 8) + 32 + 16));
  // Recent rows per token: 40 windows of 32 floats and 4 tails of 64.
  EXPECT_DOUBLE_EQ(spec.recent_bytes_per_sequence(), 4.0 * (40 * 32 + 4 * 64) * spec.recent_tokens);
}

}  // namespace
}  // namespace deepinfer
