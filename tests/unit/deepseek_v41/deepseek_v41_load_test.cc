// A DeepSeek-V4.1 checkpoint given to the engine: it loads as DeepseekV41 with its hybrid state;
// a broken one is refused in one line naming the model kind and the first thing wrong with it.
#include "deepinfer/model/deepseek_v41.h"
#include "deepinfer/model/deepseek_v41_state.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model.h"
#include "deepinfer/model/model_config.h"
#include "v41_fixture.h"

namespace deepinfer {
namespace {

Result<std::unique_ptr<model::Model>> open_dir(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(dir));
  model::WeightSource src;
  src.safetensors = st;
  src.description = dir;
  return model::load_model(src);
}

TEST(DeepseekV41Load, GenericConfigReadsTheTextModel) {
  auto c = model::config_from_hf_json(v41test::fixture_dir() + "/config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->architecture, "deepseek_v41");
  EXPECT_EQ(c->vocab_size, 128);
  EXPECT_EQ(c->num_layers, 8);
}

TEST(DeepseekV41Load, LoadsWithItsHybridState) {
  auto m = open_dir(v41test::fixture_dir());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const auto* v41 = dynamic_cast<const model::DeepseekV41*>(m->get());
  ASSERT_NE(v41, nullptr);
  EXPECT_EQ((*m)->config().architecture, "deepseek_v41");
  EXPECT_EQ((*m)->config().num_layers, 8);
  const model::KvCacheSpec spec = (*m)->kv_cache_spec();
  EXPECT_EQ(spec.state_kinds.size(), model::v41_kv_cache_spec(v41->v41_config()).state_kinds.size());
  EXPECT_EQ(spec.token_history, 3);  // engram_max_ngram_size 4
  EXPECT_EQ(spec.recent_tokens, 4);
  EXPECT_EQ(spec.block_size_multiple, 2);
}

TEST(DeepseekV41Load, BrokenCheckpointsNameTheProblemFirst) {
  {
    v41test::EditedCopy d(
        "load_cfg", [](nlohmann::json& c) { c["text_config"]["kv_source_layer_ids"] = {3}; },
        v41test::no_edit);
    auto m = open_dir(d.dir.string());
    ASSERT_FALSE(m.is_ok());
    EXPECT_NE(m.status().message().find("DeepSeek-V4.1"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("no KV source"), std::string::npos) << m.status().message();
  }
  {
    v41test::EditedCopy d("load_hash", v41test::no_edit, [](nlohmann::json& h) { h = nullptr; });
    auto m = open_dir(d.dir.string());
    ASSERT_FALSE(m.is_ok());
    EXPECT_NE(m.status().message().find("engram_hash.json"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("scripts/make_engram_hash.py"), std::string::npos)
        << m.status().message();
  }
  {  // a layer the config makes an index source has no indexer weights
    v41test::EditedCopy d(
        "load_weights",
        [](nlohmann::json& c) {
          c["text_config"]["index_source_layer_ids"] = {2, 5, 6, 7};
        },
        v41test::no_edit);
    auto m = open_dir(d.dir.string());
    ASSERT_FALSE(m.is_ok());
    const std::string& msg = m.status().message();
    EXPECT_NE(msg.find("DeepSeek-V4.1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layers.6.attn.indexer.wq_b.weight"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace deepinfer
