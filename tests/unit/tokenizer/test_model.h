// Shared by the tokenizer and chat tests: loads SmolLM2's tokenizer from $DEEPINFER_HOME, or
// says why not (the caller skips, except under CI=true where a missing model is a failure).
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/model/format/gguf.h"
#include "deepinfer/recipe/tokenizer.h"

namespace deepinfer::recipe::testing {

inline std::string model_path() {
  const char* home = std::getenv("DEEPINFER_HOME");
  std::string base = home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/deepinfer";
  return base + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// Loaded once per test binary; nullptr (with `why`) when the model is absent.
inline const Tokenizer* smollm2(std::string* why) {
  static std::string error;
  static std::unique_ptr<Tokenizer> tok = [] {
    std::unique_ptr<Tokenizer> t;
    auto file = format::GgufFile::open(model_path());
    if (!file.is_ok()) {
      error = file.status().message();
      return t;
    }
    auto r = Tokenizer::from_gguf(**file);
    if (!r.is_ok()) {
      error = r.status().message();
      return t;
    }
    return std::move(r).value();
  }();
  if (why) *why = error;
  return tok.get();
}

inline std::string source_dir() {
  const char* env = std::getenv("DEEPINFER_SOURCE_DIR");
  return env ? env : DEEPINFER_SOURCE_DIR;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace deepinfer::recipe::testing

// Skips the test when the model is missing, fails instead under CI=true.
#define DI_REQUIRE_SMOLLM2(tok)                                                  \
  std::string di_why_;                                                           \
  const ::deepinfer::recipe::Tokenizer* tok = ::deepinfer::recipe::testing::smollm2(&di_why_); \
  if (!tok) {                                                                    \
    if (::deepinfer::recipe::testing::in_ci()) FAIL() << "model needed: " << di_why_; \
    GTEST_SKIP() << "SmolLM2 GGUF not available: " << di_why_;                   \
  }
