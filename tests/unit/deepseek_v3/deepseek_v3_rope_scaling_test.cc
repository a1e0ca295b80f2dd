// DeepSeek-V3 takes every RoPE scaling the shared translation knows (llama3 included, which an
// older copy of the translation lacked), and refuses an unknown one by name.
#include <filesystem>

#include <unistd.h>

#include "ds_fixture.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// A copy of the moe_yarn fixture with `rope` as its rope_parameters block.
std::string copy_with_rope(const std::string& tag, const nlohmann::json& rope) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_ds_rope_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = dstest::fixture_dir("moe_yarn");
  fs::copy_file(src + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["rope_parameters"] = rope;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir.string();
}

// Logits at every position of a fixed sequence under `rope`.
std::vector<float> logits_with(const std::string& tag, const nlohmann::json& rope) {
  const std::string dir = copy_with_rope(tag, rope);
  auto m = dstest::open_dir(dir);
  fs::remove_all(dir);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return {};
  // Positions past original_max_position_embeddings, where llama3 scaling changes frequencies.
  std::vector<int32_t> ids(24);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(1 + (i * 7) % 200);
  ThreadPool pool(1);
  return testing::all_position_logits(**m, ids, pool);
}

TEST(DeepseekV3RopeScaling, Llama3IsAcceptedAndRuns) {
  const std::vector<float> scaled = logits_with("llama3", {{"rope_type", "llama3"},
                                                          {"rope_theta", 10000.0},
                                                          {"factor", 8.0},
                                                          {"low_freq_factor", 1.0},
                                                          {"high_freq_factor", 4.0},
                                                          {"original_max_position_embeddings", 16}});
  const std::vector<float> plain = logits_with("default", {{"rope_type", "default"}, {"rope_theta", 10000.0}});
  ASSERT_FALSE(scaled.empty());
  ASSERT_EQ(scaled.size(), plain.size());
  for (float v : scaled) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(scaled, plain);  // the scaling reached the kernel
}

TEST(DeepseekV3RopeScaling, UnknownTypeIsRefusedByName) {
  const std::string dir = copy_with_rope("dynamic", {{"rope_type", "dynamic"}, {"factor", 2.0}});
  auto m = dstest::open_dir(dir);
  fs::remove_all(dir);
  ASSERT_FALSE(m.is_ok());
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("'dynamic'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deepseek_v3"), std::string::npos) << msg;
}

}  // namespace
}  // namespace deepinfer
