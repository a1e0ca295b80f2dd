// DeepSeek-V4 config defaults and state size: an empty-ish config.json gives transformers'
// V4-Flash defaults (43 layers: 2 window, 21 CSA, 20 HCA), the legacy compress_ratios form gives
// the same layer kinds, and the per-token state of the hybrid paged layout is checked against
// DEEPSEEK_V4.md's compact ~6.9 KB/token (bf16).
#include "deepinfer/model/deepseek_v4_state.h"

#include <unistd.h>

#include <filesystem>

#include "deepinfer/model/deepseek_v4_attention.h"
#include "deepinfer/model/deepseek_v4_mhc.h"
#include "v4_fixture.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

model::DeepseekV4Config parse(const nlohmann::json& j) {
  const fs::path p =
      fs::temp_directory_path() / ("deepinfer_v4_cfg_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump();
  auto c = model::deepseek_v4_config_from_json(p.string());
  fs::remove(p);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? *c : model::DeepseekV4Config{};
}

TEST(DeepseekV4State, FlashDefaultsAndLegacyRatiosAgree) {
  const auto c = parse({{"model_type", "deepseek_v4"}});
  ASSERT_EQ(c.num_layers, 43);
  std::vector<int> ratios;
  for (int l = 0; l < 43; ++l) ratios.push_back(l < 2 ? 0 : l % 2 == 0 ? 4 : 128);
  ratios.push_back(0);  // the MTP layer's entry
  // DEEPSEEK_V4.md's layout, in the legacy form: layers 0-1 window, even CSA, odd HCA.
  // (transformers' default without layer_types is 2 HCA then alternating, so compare the legacy
  // form to itself.)
  const auto legacy =
      parse({{"model_type", "deepseek_v4"}, {"compress_ratios", ratios}, {"num_hash_layers", 3}});
  int csa = 0, hca = 0, window = 0, hash = 0;
  for (const auto& L : legacy.layers) {
    csa += L.attn == model::V4Attn::kCsa;
    hca += L.attn == model::V4Attn::kHca;
    window += L.attn == model::V4Attn::kWindow;
    hash += L.hash_moe;
  }
  EXPECT_EQ(window, 2);
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(hash, 3);
  EXPECT_EQ(legacy.layers[2].ratio, 4);
  EXPECT_EQ(legacy.layers[3].ratio, 128);
  EXPECT_EQ(legacy.rope_dim, 64);
  // Compact state (DEEPSEEK_V4.md, bf16): CSA entry 512/4 + indexer key 128/4, HCA 512/128 per
  // token; window rings and tails are fixed per sequence.
  double compact = 0;
  for (const auto& L : legacy.layers)
    compact += L.attn == model::V4Attn::kCsa   ? (512.0 / 4 + 128.0 / 4) * 2
               : L.attn == model::V4Attn::kHca ? 512.0 / 128 * 2
                                               : 0;
  EXPECT_NEAR(compact, 6900, 100);
  // Ours: the same entries, kept in f32 (twice the bf16 bytes); window rows and compressor
  // inputs only for the last recent_tokens tokens of each sequence.
  const model::KvCacheSpec spec = model::v4_kv_cache_spec(legacy);
  const double per_token = spec.paged_bytes_per_token();
  EXPECT_DOUBLE_EQ(per_token, 2 * compact);
  EXPECT_EQ(spec.recent_tokens, 128);
  EXPECT_EQ(spec.block_size_multiple, 128);
  // Recent row per token: window K=V 512 on every layer; CSA + its indexer: 2*1024 + 4*128;
  // HCA: 2*512.
  const double recent_floats = 43 * 512.0 + 21 * (2 * 1024 + 4 * 128) + 20 * (2 * 512);
  EXPECT_DOUBLE_EQ(spec.recent_bytes_per_sequence(), recent_floats * 4 * 128);
  std::printf(
      "V4-Flash state: %.0f B/token paged (f32; %.0f B in bf16, target %.0f), recent rows "
      "%.1f MiB per sequence (f32, last %d tokens)\n",
      per_token, per_token / 2, compact, spec.recent_bytes_per_sequence() / (1 << 20),
      spec.recent_tokens);
}

// A legacy flat YaRN block (as DeepSeek's config.json ships it, mscale fields included) applies
// to the compressed layers only, with unscaled cos/sin; window layers keep plain RoPE.
TEST(DeepseekV4State, FlatYarnIsTheCompressedLayersRope) {
  const auto c = parse({{"model_type", "deepseek_v4"},
                        {"rope_theta", 10000.0},
                        {"compress_rope_theta", 160000.0},
                        {"rope_scaling",
                         {{"type", "yarn"},
                          {"factor", 16},
                          {"original_max_position_embeddings", 65536},
                          {"beta_fast", 32},
                          {"beta_slow", 1},
                          {"mscale", 1.0},
                          {"mscale_all_dim", 1.0}}}});
  EXPECT_EQ(c.main_scaling.type, kernels::RopeScalingType::kNone);
  EXPECT_EQ(c.main_theta, 10000.0f);
  EXPECT_EQ(c.compress_scaling.type, kernels::RopeScalingType::kYarn);
  EXPECT_EQ(c.compress_scaling.factor, 16.0f);
  EXPECT_EQ(c.compress_scaling.original_max_pos, 65536);
  EXPECT_EQ(c.compress_scaling.attention_factor, 1.0f);
  EXPECT_EQ(c.compress_theta, 160000.0f);
}

TEST(DeepseekV4State, LayoutFieldsDoNotOverlap) {
  const auto c = parse(
      {{"model_type", "deepseek_v4"},
       {"head_dim", 16},
       {"index_head_dim", 8},
       {"partial_rotary_factor", 0.5},
       {"num_hidden_layers", 3},
       {"compress_rates", {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 8}}},
       {"layer_types",
        {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"}}});
  const int bs = 16;
  const auto w = model::v4_state_layout(c, 0, bs);
  const auto csa = model::v4_state_layout(c, 1, bs);
  const auto hca = model::v4_state_layout(c, 2, bs);
  EXPECT_EQ(w.recent_floats, 16);
  EXPECT_EQ(w.block_floats, 0);
  EXPECT_EQ(hca.comp_kv, 16);
  EXPECT_EQ(hca.comp_score, 32);
  EXPECT_EQ(hca.recent_floats, 16 + 2 * 16);
  EXPECT_EQ(hca.block_floats, 2 * 16);  // two entries of 8 tokens per block
  EXPECT_EQ(csa.comp_score, 16 + 32);
  EXPECT_EQ(csa.idx_kv, 16 + 64);
  EXPECT_EQ(csa.idx_score, csa.idx_kv + 16);
  EXPECT_EQ(csa.recent_floats, csa.idx_score + 16);
  EXPECT_EQ(csa.idx_entries, 4 * 16);  // after four entries of head_dim
  EXPECT_EQ(csa.block_floats, 4 * 16 + 4 * 8);
  // The engine's spec describes the same sizes.
  const model::KvCacheSpec spec = model::v4_kv_cache_spec(c);
  for (int l = 0; l < 3; ++l) {
    const auto lay = model::v4_state_layout(c, l, bs);
    EXPECT_EQ(spec.block_floats(l, bs), lay.block_floats) << l;
    EXPECT_EQ(spec.recent_row_floats(l), lay.recent_floats) << l;
  }
  EXPECT_EQ(spec.block_size_multiple, 8);
  EXPECT_EQ(spec.recent_tokens, 128);  // max(sliding_window 128, 2 * 4 (CSA overlap), 8)
}

TEST(DeepseekV4State, SinkhornIsDoublyStochastic) {
  std::vector<float> comb = {0.3f, -1.2f, 2.0f, 0.1f, 0.7f, -0.4f, 1.5f, 0.0f, -2.0f};
  model::v4_sinkhorn(comb.data(), 3, 20, 1e-6f);
  for (int i = 0; i < 3; ++i) {
    float row = 0, col = 0;
    for (int j = 0; j < 3; ++j) {
      row += comb[i * 3 + j];
      col += comb[j * 3 + i];
    }
    EXPECT_NEAR(row, 1.0f, 1e-3f);
    EXPECT_NEAR(col, 1.0f, 1e-5f);
  }
}

TEST(DeepseekV4State, IndexerTopkTakesBestAndBreaksTiesTowardEarlier) {
  const float scores[] = {0.0f, 2.0f, 0.0f, 5.0f, 0.0f};
  int32_t out[5];
  ASSERT_EQ(model::v4_indexer_topk(scores, 5, 3, out), 3);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 0);
  ASSERT_EQ(model::v4_indexer_topk(scores, 2, 3, out), 2);  // fewer visible than k
}

}  // namespace
}  // namespace deepinfer
