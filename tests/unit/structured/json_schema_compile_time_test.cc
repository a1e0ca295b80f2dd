// Compile-only timing of chosen JSONSchemaBench files (a benchmark, so disabled by default):
// DEEPINFER_GRAMMAR_TIME_FILES=a.json:b.json [DEEPINFER_GRAMMAR_TIME_REPS=20] test_grammar
// --gtest_also_run_disabled_tests --gtest_filter='JsonSchemaCompileTime.*'. Prints the minimum
// and median time to build the grammar IR per file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "deepinfer/structured/json_schema/compiler.h"

namespace deepinfer::structured {
namespace {

std::vector<std::string> split_paths(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, ':');)
    if (!p.empty()) out.push_back(p);
  return out;
}

TEST(JsonSchemaCompileTime, DISABLED_Files) {
  const char* files = std::getenv("DEEPINFER_GRAMMAR_TIME_FILES");
  if (!files) GTEST_SKIP() << "set DEEPINFER_GRAMMAR_TIME_FILES=a.json:b.json";
  int reps = 20;
  if (const char* r = std::getenv("DEEPINFER_GRAMMAR_TIME_REPS")) reps = std::max(1, std::atoi(r));
  for (const auto& path : split_paths(files)) {
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(ss.str());
    std::string schema = (doc.is_object() && doc.contains("schema") ? doc["schema"] : doc).dump();
    std::vector<double> ms;
    bool ok = true;
    std::string error;
    for (int i = 0; i < reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto g = compile_json_schema(schema, JsonSchemaOptions{});
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!g.is_ok()) {
        ok = false;
        error = g.status().message();
      }
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-70s min %8.3f ms  median %8.3f ms  (%d runs)%s%s\n", path.c_str(), ms.front(),
                ms[ms.size() / 2], reps, ok ? "" : "  REFUSED: ", error.c_str());
  }
}

}  // namespace
}  // namespace deepinfer::structured
