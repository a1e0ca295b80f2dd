// A DeepSeek-V4.1 checkpoint given to the engine: its config and Engram layout are checked, then it
// is refused in one line naming it (the forward pass is not built), never loaded half-built.
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

TEST(DeepseekV41Load, RefusedInOneLineUntilBuilt) {
  auto m = open_dir(v41test::fixture_dir());
  ASSERT_FALSE(m.is_ok());
  const std::string& msg = m.status().message();
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("DeepSeek-V4.1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not built yet"), std::string::npos) << msg;
  EXPECT_NE(msg.find(v41test::fixture_dir()), std::string::npos) << msg;
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
  }
  {  // the weights are read before the refusal: a layer the config makes an index source has none
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
    EXPECT_EQ(msg.find("not built yet"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace deepinfer
