// The tiny Llama fixture (tests/reference/fixtures/tiny_llama, 256-token vocabulary) for the
// runner tests: loading it, a byte tokenizer for engines over it, and a copy whose embedding
// of one token is NaN (every sequence holding that token gets non-finite logits).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/test_model.h"
#include "deepinfer/model/format/safetensors.h"
#include "deepinfer/model/model.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::runnertest {

inline std::string fixture_dir() { return testing::source_dir() + "/tests/reference/fixtures/tiny_llama"; }

inline std::unique_ptr<model::Model> open_model(const std::string& dir = fixture_dir()) {
  auto st = format::SafetensorsModel::open(dir);
  EXPECT_TRUE(st.is_ok()) << st.status().message();
  if (!st.is_ok()) return nullptr;
  model::WeightSource src;
  src.safetensors = *st;
  src.description = dir;
  auto m = model::load_model(src);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// One token per byte; EOS is the fixture's eos_token_id (2).
inline std::shared_ptr<const recipe::Tokenizer> byte_tokenizer() {
  recipe::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  spec.bos_id = 1;
  spec.eos_id = 2;
  auto t = recipe::Tokenizer::build(std::move(spec));
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::shared_ptr<const recipe::Tokenizer>(std::move(t).value());
}

// Copies the fixture to `dir` with the BF16 embedding row of `token` set to NaN.
inline void write_nan_embedding_copy(const std::string& dir, int token) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fixture_dir() + "/config.json", dir + "/config.json");
  std::ifstream in(fixture_dir() + "/model.safetensors", std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, data.data(), 8);
  const auto header = nlohmann::json::parse(data.substr(8, header_len));
  const auto& t = header.at("model.embed_tokens.weight");
  ASSERT_EQ(t.at("dtype"), "BF16");
  const int64_t hidden = t.at("shape")[1].get<int64_t>();
  const size_t begin = 8 + header_len + t.at("data_offsets")[0].get<size_t>() + size_t(token) * hidden * 2;
  for (int64_t i = 0; i < hidden; ++i) {
    data[begin + 2 * i] = static_cast<char>(0xc0);  // 0x7fc0: a quiet NaN in BF16
    data[begin + 2 * i + 1] = static_cast<char>(0x7f);
  }
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << data;
}

}  // namespace deepinfer::runnertest
