// DeepSeek-V4.1 config: the tiny fixture's fields and layer roles, V4.1-Flash's published layout
// (roles as DEEPSEEK_V4.md lists them), and broken configs refused naming the field.
#include "deepinfer/model/deepseek_v41_config.h"

#include "v41_fixture.h"

namespace deepinfer {
namespace {

using model::deepseek_v41_config_from_json;
using model::DeepseekV41Config;
using v41test::EditedCopy;
using v41test::no_edit;

TEST(DeepseekV41Config, TinyFixtureFieldsAndRoles) {
  auto c = deepseek_v41_config_from_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->num_layers, 8);
  EXPECT_EQ(c->hidden, 32);
  EXPECT_EQ(c->hc_mult, 2);
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_FLOAT_EQ(c->gate_temp, 1.7f);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-20f);
  EXPECT_EQ(c->fp8_block, 32);
  EXPECT_TRUE(c->fp4_experts);
  EXPECT_EQ(c->compress_scaling.type, kernels::RopeScalingType::kYarn);
  EXPECT_EQ(c->main_scaling.type, kernels::RopeScalingType::kNone);
  // compress_ratios [0,0,2,2,2,1,1,1], KV sources [2,5], index sources [2,5,7], candidates at 5.
  const int kv[] = {-1, -1, 2, 2, 2, 5, 5, 5}, idx[] = {-1, -1, 2, 2, 2, 5, 5, 7};
  for (int i = 0; i < 8; ++i) {
    const model::V41Layer& L = c->layers[i];
    EXPECT_EQ(L.kv_source, kv[i]) << i;
    EXPECT_EQ(L.index_source, idx[i]) << i;
    EXPECT_EQ(L.owns_compressor, i == 2 || i == 5) << i;
    EXPECT_EQ(L.runs_indexer, i == 2 || i == 5 || i == 7) << i;
    EXPECT_EQ(L.publishes_candidates, i == 5) << i;
    EXPECT_EQ(L.uses_candidates, i == 7) << i;
    EXPECT_EQ(L.engram, i == 1 || i == 4) << i;
  }
  EXPECT_EQ(c->engram.n_heads, 2);
  EXPECT_EQ(c->engram.vocab_size, (std::vector<int64_t>{29, 37, 41}));
}

// V4.1-Flash's layer layout (DEEPSEEK_V4.md): 40 layers, [0,0] + [2]*18 + [1]*20.
void flash_layout(nlohmann::json& cfg) {
  nlohmann::json& t = cfg["text_config"];
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  ratios.insert(ratios.end(), {0, 0, 0});  // the DSpark draft layers' entries follow
  t["num_hidden_layers"] = 40;
  t["compress_ratios"] = ratios;
  t["kv_source_layer_ids"] = {2, 8, 14, 20};
  t["index_source_layer_ids"] = {2, 8, 14, 20, 24, 28, 32, 36};
  t["candidate_source_layer_id"] = 20;
  t["engram_layer_ids"] = {1, 14};
}

TEST(DeepseekV41Config, FlashLayoutRoles) {
  EditedCopy d("flash", flash_layout, no_edit);
  auto c = deepseek_v41_config_from_json(d.config());
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  for (int i = 0; i < 40; ++i) {
    const model::V41Layer& L = c->layers[i];
    const int want_kv = i < 2 ? -1 : i < 8 ? 2 : i < 14 ? 8 : i < 20 ? 14 : 20;
    const int want_idx = i < 2 ? -1 : i < 20 ? want_kv : i < 24 ? 20 : (i / 4) * 4;
    EXPECT_EQ(L.ratio, i < 2 ? 0 : i < 20 ? 2 : 1) << i;
    EXPECT_EQ(L.kv_source, want_kv) << i;
    EXPECT_EQ(L.index_source, want_idx) << i;
    EXPECT_EQ(L.uses_candidates, i == 24 || i == 28 || i == 32 || i == 36) << i;
    EXPECT_EQ(L.publishes_candidates, i == 20) << i;
    EXPECT_EQ(L.engram, i == 1 || i == 14) << i;
  }
}

// A config edited by `edit` is refused; the message names the file and contains `needle`.
void expect_refused(const std::string& tag, void (*edit)(nlohmann::json&),
                    const std::string& needle) {
  EditedCopy d(tag, edit, no_edit);
  auto c = deepseek_v41_config_from_json(d.config());
  ASSERT_FALSE(c.is_ok()) << tag;
  EXPECT_NE(c.status().message().find(needle), std::string::npos)
      << tag << ": " << c.status().message();
  EXPECT_NE(c.status().message().find(d.config()), std::string::npos) << c.status().message();
}

TEST(DeepseekV41Config, BrokenLayoutsAreRefusedNamingTheField) {
  expect_refused(
      "no_text", [](nlohmann::json& c) { c.erase("text_config"); }, "text_config");
  expect_refused(
      "below_sources",
      [](nlohmann::json& c) {
        c["text_config"]["kv_source_layer_ids"] = {3, 5};
      },
      "no KV source");
  expect_refused(
      "ratio_mismatch", [](nlohmann::json& c) { c["text_config"]["compress_ratios"][5] = 2; },
      "would read the compressed KV");
  expect_refused(
      "ratio_3", [](nlohmann::json& c) { c["text_config"]["compress_ratios"][2] = 3; },
      "compress_ratios[2]");
  expect_refused(
      "window_source",
      [](nlohmann::json& c) {
        c["text_config"]["kv_source_layer_ids"] = {1, 2, 5};
      },
      "compress_ratios[1] is 0");
  expect_refused(
      "unsorted",
      [](nlohmann::json& c) {
        c["text_config"]["index_source_layer_ids"] = {5, 2, 7};
      },
      "index_source_layer_ids");
  expect_refused(
      "out_of_range",
      [](nlohmann::json& c) {
        c["text_config"]["engram_layer_ids"] = {1, 8};
      },
      "engram_layer_ids");
  expect_refused(
      "candidate_not_index",
      [](nlohmann::json& c) { c["text_config"]["candidate_source_layer_id"] = 6; },
      "candidate_source_layer_id");
  expect_refused(
      "stale_topk",
      [](nlohmann::json& c) {
        c["text_config"]["index_source_layer_ids"] = {2, 7};
        c["text_config"]["candidate_source_layer_id"] = -1;
      },
      "top-k of layer 2");
  expect_refused(
      "gate_temp", [](nlohmann::json& c) { c["text_config"]["gate_temp"] = 0; }, "gate_temp");
  expect_refused(
      "engram_sizes",
      [](nlohmann::json& c) {
        c["text_config"]["engram_vocab_size"] = {29, 37};
      },
      "engram_vocab_size");
  expect_refused(
      "block_64",
      [](nlohmann::json& c) {
        c["quantization_config"]["weight_block_size"] = {64, 64};
      },
      "weight_block_size");
  expect_refused(
      "hash_layers", [](nlohmann::json& c) { c["text_config"]["num_hash_layers"] = 3; },
      "num_hash_layers");
  expect_refused(
      "wrong_type", [](nlohmann::json& c) { c["text_config"]["index_topk"] = "many"; },
      "index_topk");
}

}  // namespace
}  // namespace deepinfer
