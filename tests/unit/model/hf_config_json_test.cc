// The config.json reading every architecture shares: typed fields and what null means, the RoPE
// block and its scaling fields, and the file-level errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "deepinfer/model/hf_config_json.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
namespace hf = model::hf;

TEST(HfConfigJson, FieldDefaultsTypesAndNulls) {
  const json j = {{"n", 3}, {"s", "x"}, {"z", nullptr}};
  EXPECT_EQ(hf::field(j, "n", 0), 3);
  EXPECT_EQ(hf::field(j, "absent", 7), 7);
  EXPECT_THROW(hf::field(j, "s", 0), hf::BadField);
  EXPECT_THROW(hf::field(j, "z", 1.5f), hf::BadField);                   // llama / deepseek_v3
  EXPECT_EQ(hf::field(j, "z", 1.5f, hf::Null::kDefault), 1.5f);          // deepseek_v4
  EXPECT_THROW(hf::field(j, "s", 0, hf::Null::kDefault), hf::BadField);  // still a wrong type
  EXPECT_EQ(hf::nullable_int(j, "z", 5), 0);
  EXPECT_EQ(hf::nullable_int(j, "absent", 5), 5);
  EXPECT_THROW(hf::nullable_int(j, "s", 5), hf::BadField);
}

TEST(HfConfigJson, RopeBlockAndScaling) {
  const json both = {{"rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 500.0}}},
                     {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}};
  const json* block = hf::rope_block(both);
  ASSERT_NE(block, nullptr);
  float theta = 10000.0f;
  model::RopeScalingConfig rs = hf::rope_scaling(*block, &theta);
  EXPECT_EQ(rs.type, "yarn");  // rope_parameters wins
  EXPECT_EQ(rs.factor, 4.0f);
  EXPECT_EQ(theta, 500.0f);

  const json legacy = {{"rope_parameters", nullptr}, {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}};
  ASSERT_NE(hf::rope_block(legacy), nullptr);
  theta = 10000.0f;
  rs = hf::rope_scaling(*hf::rope_block(legacy), &theta);
  EXPECT_EQ(rs.type, "linear");
  EXPECT_EQ(rs.factor, 2.0f);
  EXPECT_EQ(theta, 10000.0f);

  EXPECT_EQ(hf::rope_block(json{{"rope_theta", 1.0}}), nullptr);
  EXPECT_EQ(hf::rope_scaling(json{{"rope_type", "default"}}, &theta).type, "none");
  const json with_null = {{"rope_type", "yarn"}, {"factor", nullptr}};
  EXPECT_THROW(hf::rope_scaling(with_null, &theta), hf::BadField);
  EXPECT_EQ(hf::rope_scaling(with_null, &theta, hf::Null::kDefault).factor, 1.0f);
}

TEST(HfConfigJson, FileErrorsNameTheFileAndTheKey) {
  const fs::path dir = fs::temp_directory_path() / ("deepinfer_hfjson_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "config.json").string();
  auto parse_int = [](const json& j) {
    (void)hf::field(j, "hidden_size", 0);
    return Status::ok();
  };

  Status st = hf::parse_config_file(path, parse_int);
  EXPECT_NE(st.message().find("cannot open"), std::string::npos) << st.message();

  std::ofstream(path) << "{ not json";
  st = hf::parse_config_file(path, parse_int);
  EXPECT_NE(st.message().find("invalid JSON"), std::string::npos) << st.message();

  std::ofstream(path) << "[1, 2]";
  st = hf::parse_config_file(path, parse_int);
  EXPECT_NE(st.message().find("expected a JSON object"), std::string::npos) << st.message();

  std::ofstream(path) << R"({"hidden_size": "wide"})";
  st = hf::parse_config_file(path, parse_int);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'hidden_size' has the wrong type"), std::string::npos) << st.message();

  std::ofstream(path) << R"({"hidden_size": 64})";
  EXPECT_TRUE(hf::parse_config_file(path, parse_int).is_ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer
