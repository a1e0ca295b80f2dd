// See bench_schema_compile.h. Replaces a disabled gtest that timed the same compile.
#include "deepinfer/tools/bench_schema_compile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/tools/cli_common.h"

namespace deepinfer::tools {
namespace {

Result<std::vector<std::string>> schema_files(const SchemaCompileBenchOptions& o) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(o.data, ec)) return std::vector<std::string>{o.data};
  std::vector<std::string> all;
  for (const auto& e : std::filesystem::directory_iterator(o.data, ec))
    if (e.is_regular_file()) all.push_back(e.path().string());
  if (ec) return io_error("bench --mode schema-compile: cannot list '{}': {}", o.data, ec.message());
  std::sort(all.begin(), all.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < all.size(); i += std::max(1, o.stride)) {
    if (o.limit > 0 && static_cast<int>(out.size()) >= o.limit) break;
    out.push_back(all[i]);
  }
  if (out.empty()) return not_found("bench --mode schema-compile: no schema files in '{}'", o.data);
  return out;
}

}  // namespace

int run_schema_compile_bench(const SchemaCompileBenchOptions& opts) {
  auto files = schema_files(opts);
  if (!files.is_ok()) return report_error(files.status());
  for (const auto& path : *files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::ordered_json doc;
    try {
      doc = nlohmann::ordered_json::parse(ss.str());
    } catch (const std::exception& e) {
      return report_error(corrupt("bench --mode schema-compile: '{}' is not valid JSON: {}", path, e.what()));
    }
    const std::string schema = (doc.is_object() && doc.contains("schema") ? doc["schema"] : doc).dump();
    std::vector<double> ms;
    std::string error;
    for (int i = 0; i < std::max(1, opts.repeat); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto g = structured::compile_json_schema(schema, structured::JsonSchemaOptions{});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!g.is_ok()) error = g.status().message();
    }
    std::sort(ms.begin(), ms.end());
    nlohmann::json j = {{"mode", "schema-compile"}, {"file", path},        {"runs", ms.size()},
                        {"min_ms", ms.front()},     {"median_ms", ms[ms.size() / 2]}, {"refused", error}};
    std::printf("%s\n", j.dump().c_str());
  }
  return kExitOk;
}

}  // namespace deepinfer::tools
