// Draws bench results as line charts (cairo; .svg or .png): the trade-off chart DeepSeek
// publishes for prefill/decode/serve (per-sequence speed on x, total throughput on y, one point
// per batch size) and, for --mode spec, tokens/s against batch size per configuration.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"

namespace deepinfer::tools {

struct PlotPoint {
  double x = 0, y = 0;
  std::string label;  // drawn next to the point; empty = none
};
struct PlotSeries {
  std::string name;  // in the legend (drawn when there are several series)
  std::vector<PlotPoint> points;  // joined in this order
};
struct PlotSpec {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
};

bool plot_format_supported(const std::string& path);
Status write_plot(const std::string& path, const PlotSpec& spec);
// One curve per engine and prompt length. A row's "engine" (absent = DeepInfer) names its curve
// once rows of more than one engine are drawn, as when --plot-with adds llama.cpp's rows.
Status write_throughput_plot(const std::string& path, const std::string& mode,
                             const std::vector<nlohmann::json>& results);
// Rows for --plot-with: JSON lines (as bench prints them, or bench/compare_llamacpp.py
// --rows-out writes them), each with batch, prompt_tokens, tokens_per_s and
// per_seq_tokens_per_s; blank lines skipped. Errors name the file and the line.
Result<std::vector<nlohmann::json>> read_plot_rows(const std::string& path);
// `bench --mode spec` rows (task, config, batch, tokens_per_s).
Status write_spec_plot(const std::string& path, const std::vector<nlohmann::json>& results);

}  // namespace deepinfer::tools
