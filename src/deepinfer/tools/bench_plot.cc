#include "deepinfer/tools/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

namespace deepinfer::tools {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least v.
double nice_ceiling(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace

bool plot_format_supported(const std::string& path) { return ends_with(path, ".svg"); }

Status write_throughput_plot(const std::string& path, const std::string& mode,
                             const std::vector<nlohmann::json>& results) {
  const double W = 640, H = 440, left = 80, right = 30, top = 50, bottom = 60;
  double max_x = 0, max_y = 0;
  for (const auto& r : results) {
    max_x = std::max(max_x, r.value("per_seq_tokens_per_s", 0.0));
    max_y = std::max(max_y, r.value("tokens_per_s", 0.0));
  }
  max_x = nice_ceiling(max_x * 1.05);
  max_y = nice_ceiling(max_y * 1.05);
  auto px = [&](double x) { return left + (W - left - right) * x / max_x; };
  auto py = [&](double y) { return H - bottom - (H - top - bottom) * y / max_y; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      W, H);
  svg += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">DeepInfer {}: total vs per-sequence throughput</text>\n",
                     W / 2, mode);
  for (int i = 0; i <= 5; ++i) {
    const double xv = max_x * i / 5, yv = max_y * i / 5;
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", px(xv), py(0), py(max_y));
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#ddd\"/>\n", px(0), py(yv), px(max_x));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", px(xv), py(0) + 18, xv);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:g}</text>\n", px(0) - 6, py(yv) + 4, yv);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">tokens/s per sequence</text>\n", px(max_x / 2), H - 15);
  svg += fmt::format("<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">total tokens/s</text>\n",
                     py(max_y / 2));
  std::string points;
  for (const auto& r : results) {
    const double x = px(r.value("per_seq_tokens_per_s", 0.0)), y = py(r.value("tokens_per_s", 0.0));
    points += fmt::format("{:.1f},{:.1f} ", x, y);
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f77b4\"/>\n", x, y);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">batch {}</text>\n", x + 6, y - 6,
                       r.value("batch", 0));
  }
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\"/>\n</svg>\n", points);
  std::ofstream out(path);
  if (!out) return io_error("{}: cannot open for writing", path);
  out << svg;
  if (!out) return io_error("{}: write failed", path);
  return Status::ok();
}

}  // namespace deepinfer::tools
