// Helpers for the DeepSeek-V4.1 tests: the tiny fixture (tests/reference/fixtures/deepseek_v41,
// made by tests/reference/make_tiny_deepseek_v41.py), its expected outputs, and edited copies.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/test_model.h"

namespace deepinfer::v41test {

inline std::string fixture_dir() {
  return testing::source_dir() + "/tests/reference/fixtures/deepseek_v41/tiny";
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " missing";
  return nlohmann::json::parse(in);
}

// A copy of the fixture in a fresh temporary directory, config.json and engram_hash.json edited
// by `edit_config` / `edit_hash`; removed when the object goes.
struct EditedCopy {
  std::filesystem::path dir;
  template <typename F, typename G>
  EditedCopy(const std::string& tag, F edit_config, G edit_hash) {
    namespace fs = std::filesystem;
    dir = fs::temp_directory_path() / ("deepinfer_v41_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(fixture_dir() + "/model.safetensors", dir / "model.safetensors");
    nlohmann::json cfg = read_json(fixture_dir() + "/config.json");
    edit_config(cfg);
    std::ofstream(dir / "config.json") << cfg.dump(2);
    nlohmann::json hash = read_json(fixture_dir() + "/engram_hash.json");
    edit_hash(hash);
    if (!hash.is_null()) std::ofstream(dir / "engram_hash.json") << hash.dump();
  }
  ~EditedCopy() { std::filesystem::remove_all(dir); }
  std::string config() const { return (dir / "config.json").string(); }
  std::string hash() const { return (dir / "engram_hash.json").string(); }
};

inline void no_edit(nlohmann::json&) {}

}  // namespace deepinfer::v41test
