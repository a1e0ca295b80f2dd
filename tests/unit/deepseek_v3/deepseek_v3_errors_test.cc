// Broken DeepSeek-V3 directories fail with a Status naming the problem, never a crash: unknown
// quantization config, a config key of the wrong type, shapes that disagree with the config,
// a missing tensor, and a KV cache of the wrong shape.
#include <filesystem>

#include <unistd.h>

#include "ds_fixture.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// A copy of the moe_yarn fixture whose config.json has `key` set to `value`.
std::string broken_copy(const std::string& key, const nlohmann::json& value) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_ds_broken_" + key + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = dstest::fixture_dir("moe_yarn");
  fs::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg[key] = value;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir.string();
}

std::string load_error(const std::string& key, const nlohmann::json& value) {
  const std::string dir = broken_copy(key, value);
  auto m = dstest::open_dir(dir);
  fs::remove_all(dir);
  EXPECT_FALSE(m.is_ok()) << key;
  return m.is_ok() ? "" : m.status().message();
}

TEST(DeepseekV3Errors, UnknownQuantizationConfig) {
  const std::string msg = load_error("quantization_config", {{"quant_method", "awq"}, {"bits", 4}});
  EXPECT_NE(msg.find("quantization_config"), std::string::npos) << msg;
  EXPECT_NE(msg.find("awq"), std::string::npos) << msg;
}

TEST(DeepseekV3Errors, WrongTypeNamesTheKey) {
  const std::string msg = load_error("kv_lora_rank", "wide");
  EXPECT_NE(msg.find("kv_lora_rank"), std::string::npos) << msg;
}

TEST(DeepseekV3Errors, InconsistentRoutingIsRejected) {
  const std::string msg = load_error("topk_group", 5);  // n_group is 4
  EXPECT_NE(msg.find("topk_group"), std::string::npos) << msg;
}

TEST(DeepseekV3Errors, ShapeMismatchNamesTheTensor) {
  const std::string msg = load_error("kv_lora_rank", 48);
  EXPECT_NE(msg.find("kv_a_proj_with_mqa"), std::string::npos) << msg;
}

TEST(DeepseekV3Errors, MissingTensorNamesIt) {
  const std::string msg = load_error("q_lora_rank", nullptr);  // now expects q_proj
  EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << msg;
}

TEST(DeepseekV3Errors, WrongCacheShapeIsAnError) {
  auto m = dstest::open_fixture("no_qlora");
  ASSERT_NE(m, nullptr);
  model::KvCacheSpec spec{2, 4, 24, 16};  // a llama-style cache
  model::KvCache cache = model::KvCache::allocate(spec, 2, 4);
  ForwardBatch b;
  dstest::PagedSeq s{{1, 2, 3}, {0}, 0};
  dstest::add_step(b, s, 3, 4);
  ThreadPool pool(1);
  model::ForwardContext ctx{&pool, false};
  std::vector<float> logits(3 * 256);
  Status st = m->forward(b, cache, ctx, logits.data());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("latent"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepinfer
