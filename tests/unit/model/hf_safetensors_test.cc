// The Llama family loaded from Hugging Face directories (config.json + model.safetensors)
// against logits from transformers, on two tiny random checkpoints made by
// tests/reference/make_tiny_llama.py: tiny_llama (bf16, untied head, llama3 RoPE scaling) and
// tiny_qwen2 (f32, q/k/v bias, tied embeddings). Also checks broken directories fail cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../common/test_model.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// Both sides compute in float32 (bf16 weights widen to f32 exactly); only the order of float32
// additions differs (dot products of length <= 128 over 2 layers, relative rounding ~1e-6), and
// logits here are O(1..10), so differences are ~1e-5. 1e-3 leaves margin while still catching
// any real mistake (a wrong RoPE pairing, bias or norm moves logits by >0.01).
constexpr float kMaxAbsDiff = 1e-3f;

std::string fixture_dir(const std::string& name) {
  return testing::source_dir() + "/tests/reference/fixtures/" + name;
}

Result<std::unique_ptr<model::Model>> open_model(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(auto st, format::SafetensorsModel::open(dir));
  model::WeightSource src;
  src.safetensors = st;
  src.description = dir;
  return model::load_model(src);
}


void check_against_hf(const std::string& name) {
  const std::string dir = fixture_dir(name);
  std::ifstream in(dir + "/expected.json");
  ASSERT_TRUE(in.good()) << dir << "/expected.json missing";
  const nlohmann::json fx = nlohmann::json::parse(in);
  auto m = open_model(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const int64_t V = (*m)->config().vocab_size;
  ASSERT_EQ(V, 256);
  ThreadPool pool(2);
  float worst = 0;
  for (const auto& c : fx["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = testing::all_position_logits(**m, ids, pool);
    ASSERT_EQ(c["logits"].size(), ids.size());
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const auto ref = c["logits"][pos].get<std::vector<float>>();
      ASSERT_EQ(static_cast<int64_t>(ref.size()), V);
      float row_worst = 0;
      for (int64_t t = 0; t < V; ++t) row_worst = std::max(row_worst, std::fabs(logits[pos * V + t] - ref[t]));
      EXPECT_LT(row_worst, kMaxAbsDiff) << name << ": sequence of " << ids.size() << " tokens, position " << pos;
      worst = std::max(worst, row_worst);
    }
  }
  std::printf("%s: max |logit - HF| = %.2e\n", name.c_str(), worst);
}

TEST(HfSafetensors, TinyLlamaBf16Llama3RopeMatchesTransformers) { check_against_hf("tiny_llama"); }

TEST(HfSafetensors, TinyQwen2BiasTiedMatchesTransformers) { check_against_hf("tiny_qwen2"); }

// Copies a fixture into a fresh temp dir and rewrites one config.json key.
std::string broken_copy(const std::string& name, const std::string& key, const nlohmann::json& value) {
  const fs::path dir = fs::temp_directory_path() /
                       ("deepinfer_hf_broken_" + name + "_" + key + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fixture_dir(name) + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(fixture_dir(name) + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg[key] = value;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir.string();
}

TEST(HfSafetensors, MoreLayersInConfigThanWeightsNamesMissingTensor) {
  const std::string dir = broken_copy("tiny_llama", "num_hidden_layers", 3);
  auto m = open_model(dir);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("missing tensor 'model.layers.2."), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find(dir), std::string::npos) << m.status().message();
  fs::remove_all(dir);
}

TEST(HfSafetensors, WrongShapeNamesTensorAndShapes) {
  // The weights have intermediate_size 128; a config claiming 96 makes the first MLP matrix
  // disagree with it.
  const std::string dir = broken_copy("tiny_qwen2", "intermediate_size", 96);
  auto m = open_model(dir);
  ASSERT_FALSE(m.is_ok());
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("'model.layers.0.mlp.gate_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[128, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[96, 64]"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(HfSafetensors, HiddenSizeMismatchNamesEmbedding) {
  const std::string dir = broken_copy("tiny_llama", "hidden_size", 128);
  auto m = open_model(dir);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("'model.embed_tokens.weight'"), std::string::npos)
      << m.status().message();
  fs::remove_all(dir);
}

TEST(HfSafetensors, WrongTypeConfigFieldIsAnErrorNotACrash) {
  const std::string dir = broken_copy("tiny_qwen2", "rms_norm_eps", nullptr);
  auto m = open_model(dir);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("config.json"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("'rms_norm_eps' has the wrong type"), std::string::npos) << m.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
