// Test helpers: where the default model and the committed fixtures are. Tests that need the
// model skip when it is absent, except under CI=true where its absence is a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace deepinfer::testing {

inline std::string deepinfer_home_for_tests() {
  if (const char* h = std::getenv("DEEPINFER_HOME")) return h;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/deepinfer";
}

inline std::string default_model_path() {
  return deepinfer_home_for_tests() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string source_dir() {
  if (const char* s = std::getenv("DEEPINFER_SOURCE_DIR")) return s;
  return DEEPINFER_SOURCE_DIR;
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace deepinfer::testing

// Skips the test (or fails it under CI=true) when the default model is not downloaded.
#define DI_REQUIRE_DEFAULT_MODEL()                                                          \
  do {                                                                                      \
    if (!std::filesystem::exists(::deepinfer::testing::default_model_path())) {             \
      if (::deepinfer::testing::in_ci()) FAIL() << "missing " << ::deepinfer::testing::default_model_path(); \
      GTEST_SKIP() << "default model not downloaded: run `deepinfer pull smollm2-135m-instruct`"; \
    }                                                                                       \
  } while (0)
