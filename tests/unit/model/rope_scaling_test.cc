// RoPE scaling is read and translated in one place for every architecture: each config type maps
// to the kernel's parameters, an unknown type is an error naming the architecture, and the same
// rope_scaling block gives the same kernel parameters under llama and deepseek_v3.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../common/test_model.h"
#include "deepinfer/kernels/cpu/rope.h"
#include "deepinfer/model/layers/rope_scaling.h"
#include "deepinfer/model/model_config.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Writes `cfg` as config.json in a fresh temp directory and parses it.
Result<model::ModelConfig> parse(const nlohmann::json& cfg, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_rope_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg.dump(2);
  auto c = model::config_from_hf_json((dir / "config.json").string());
  fs::remove_all(dir);
  return c;
}

void expect_same(const kernels::RopeScaling& a, const kernels::RopeScaling& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.low_freq_factor, b.low_freq_factor);
  EXPECT_EQ(a.high_freq_factor, b.high_freq_factor);
  EXPECT_EQ(a.original_max_pos, b.original_max_pos);
  EXPECT_EQ(a.beta_fast, b.beta_fast);
  EXPECT_EQ(a.beta_slow, b.beta_slow);
  EXPECT_EQ(a.mscale, b.mscale);
  EXPECT_EQ(a.mscale_all_dim, b.mscale_all_dim);
  EXPECT_EQ(a.attention_factor, b.attention_factor);
}

TEST(RopeScaling, EveryTypeMapsToTheKernel) {
  const std::vector<std::pair<std::string, kernels::RopeScalingType>> types = {
      {"none", kernels::RopeScalingType::kNone},
      {"linear", kernels::RopeScalingType::kLinear},
      {"llama3", kernels::RopeScalingType::kLlama3},
      {"yarn", kernels::RopeScalingType::kYarn}};
  for (const auto& [name, type] : types) {
    model::RopeScalingConfig rs;
    rs.type = name;
    rs.factor = 4.0f;
    rs.low_freq_factor = 2.0f;
    rs.high_freq_factor = 8.0f;
    rs.original_max_position = 1024;
    rs.beta_fast = 16.0f;
    rs.beta_slow = 2.0f;
    rs.mscale = 0.5f;
    rs.mscale_all_dim = 0.25f;
    rs.attention_factor = 1.5f;
    auto s = model::rope_scaling_from_config(rs, "cfg", "llama");
    ASSERT_TRUE(s.is_ok()) << name << ": " << s.status().message();
    EXPECT_EQ(s->type, type) << name;
    EXPECT_EQ(s->factor, 4.0f);
    EXPECT_EQ(s->low_freq_factor, 2.0f);
    EXPECT_EQ(s->high_freq_factor, 8.0f);
    EXPECT_EQ(s->original_max_pos, 1024);
    EXPECT_EQ(s->beta_fast, 16.0f);
    EXPECT_EQ(s->beta_slow, 2.0f);
    EXPECT_EQ(s->mscale, 0.5f);
    EXPECT_EQ(s->mscale_all_dim, 0.25f);
    EXPECT_EQ(s->attention_factor, 1.5f);
  }
}

TEST(RopeScaling, UnsetOriginalContextKeepsTheKernelDefault) {
  model::RopeScalingConfig rs;
  rs.type = "yarn";
  auto s = model::rope_scaling_from_config(rs, "cfg", "deepseek_v3");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->original_max_pos, kernels::RopeScaling{}.original_max_pos);
}

TEST(RopeScaling, UnknownTypeNamesTheArchitecture) {
  model::RopeScalingConfig rs;
  rs.type = "dynamic";
  auto s = model::rope_scaling_from_config(rs, "/m/config.json", "deepseek_v3");
  ASSERT_FALSE(s.is_ok());
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'dynamic'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deepseek_v3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama3"), std::string::npos) << msg;  // the supported list
}

// tiny_llama's llama3 rope_parameters block put into a deepseek_v3 config: both configs read it the same
// way and it becomes the same kernel parameters and the same frequencies.
TEST(RopeScaling, DeepseekV3AndLlamaTranslateLlama3Alike) {
  const std::string fx = testing::source_dir() + "/tests/reference/fixtures/";
  const nlohmann::json llama_cfg = read_json(fx + "tiny_llama/config.json");
  nlohmann::json ds_cfg = read_json(fx + "deepseek_v3/moe_yarn/config.json");
  const nlohmann::json rope = llama_cfg.at("rope_parameters");  // transformers 5.x form
  ASSERT_EQ(rope.at("rope_type"), "llama3");
  ds_cfg["rope_parameters"] = rope;

  auto lc = parse(llama_cfg, "llama");
  auto dc = parse(ds_cfg, "ds");
  ASSERT_TRUE(lc.is_ok()) << lc.status().message();
  ASSERT_TRUE(dc.is_ok()) << dc.status().message();
  EXPECT_EQ(lc->architecture, "llama");
  EXPECT_EQ(dc->architecture, "deepseek_v3");
  EXPECT_EQ(dc->rope_scaling.type, "llama3");
  EXPECT_EQ(lc->rope_theta, dc->rope_theta);

  auto ls = model::rope_scaling_from_config(lc->rope_scaling, "llama", lc->architecture);
  auto ds = model::rope_scaling_from_config(dc->rope_scaling, "ds", dc->architecture);
  ASSERT_TRUE(ls.is_ok()) << ls.status().message();
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  EXPECT_EQ(ls->type, kernels::RopeScalingType::kLlama3);
  EXPECT_EQ(ls->factor, 8.0f);
  EXPECT_EQ(ls->original_max_pos, 64);
  expect_same(*ls, *ds);

  const int rot = 16;
  std::vector<double> lf(rot / 2), df(rot / 2), plain(rot / 2);
  kernels::rope_inv_freq(*ls, lc->rope_theta, rot, lf.data());
  kernels::rope_inv_freq(*ds, dc->rope_theta, rot, df.data());
  kernels::rope_inv_freq(kernels::RopeScaling{}, lc->rope_theta, rot, plain.data());
  EXPECT_EQ(lf, df);
  EXPECT_NE(lf, plain);  // the scaling does something at these wavelengths
}

}  // namespace
}  // namespace deepinfer
