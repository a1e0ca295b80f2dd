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
Status write_throughput_plot(const std::string& path, const std::string& mode,
                             const std::vector<nlohmann::json>& results);
// `bench --mode spec` rows (task, config, batch, tokens_per_s).
Status write_spec_plot(const std::string& path, const std::vector<nlohmann::json>& results);

}  // namespace deepinfer::tools
