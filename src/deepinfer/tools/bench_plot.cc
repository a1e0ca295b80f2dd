// Draws bench results with cairo: one drawing routine, rendered to an image surface for .png
// or an SVG surface for .svg, so both files show the same chart.
#include "deepinfer/tools/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <cairo-svg.h>
#include <cairo.h>
#include <fmt/format.h>

namespace deepinfer::tools {
namespace {

constexpr double kWidth = 720, kHeight = 480;
constexpr double kLeft = 86, kRight = 40, kTop = 56, kBottom = 64;

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

// Curve colours, cycled: one per series.
constexpr double kColors[][3] = {{0.12, 0.47, 0.71}, {0.84, 0.37, 0.0},  {0.17, 0.63, 0.17},
                                 {0.58, 0.40, 0.74}, {0.84, 0.15, 0.16}, {0.55, 0.34, 0.29},
                                 {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13}};

void text_at(cairo_t* cr, double x, double y, const std::string& s, double align_x, double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y + e.height * align_y - (e.height + e.y_bearing));
  cairo_show_text(cr, s.c_str());
}

struct Axes {  // data to device coordinates
  double max_x, max_y;
  double x(double v) const { return kLeft + (kWidth - kLeft - kRight) * v / max_x; }
  double y(double v) const { return kHeight - kBottom - (kHeight - kTop - kBottom) * v / max_y; }
};

// One series: its curve in point order, then each point with its label.
void draw_curve(cairo_t* cr, const std::vector<PlotPoint>& pts, const double* rgb, const Axes& ax) {
  auto px = [&](double v) { return ax.x(v); };
  auto py = [&](double v) { return ax.y(v); };
  cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width(cr, 2);
  for (size_t i = 0; i < pts.size(); ++i) {
    if (i == 0) {
      cairo_move_to(cr, px(pts[i].x), py(pts[i].y));
    } else {
      cairo_line_to(cr, px(pts[i].x), py(pts[i].y));
    }
  }
  cairo_stroke(cr);
  cairo_set_font_size(cr, 11);
  for (const auto& p : pts) {
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_arc(cr, px(p.x), py(p.y), 4.5, 0, 2 * M_PI);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    // Labels sit up-right of the point, or up-left near the right edge.
    const bool flip = px(p.x) > kWidth - kRight - 70;
    if (!p.label.empty()) text_at(cr, px(p.x) + (flip ? -8 : 8), py(p.y) - 8, p.label, flip ? 1.0 : 0.0, 0.0);
  }
}

void draw_chart(cairo_t* cr, const PlotSpec& spec) {
  double max_x = 0, max_y = 0;
  for (const auto& series : spec.series)
    for (const auto& p : series.points) {
      max_x = std::max(max_x, p.x);
      max_y = std::max(max_y, p.y);
    }
  max_x = nice_ceiling(max_x * 1.08);
  max_y = nice_ceiling(max_y * 1.08);
  const Axes ax{max_x, max_y};
  auto px = [&](double v) { return ax.x(v); };
  auto py = [&](double v) { return ax.y(v); };

  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

  // Grid and ticks: five intervals per axis.
  cairo_set_line_width(cr, 1);
  cairo_set_font_size(cr, 12);
  for (int i = 0; i <= 5; ++i) {
    const double xv = max_x * i / 5, yv = max_y * i / 5;
    cairo_set_source_rgb(cr, 0.87, 0.87, 0.87);
    cairo_move_to(cr, px(xv) + 0.5, py(0));
    cairo_line_to(cr, px(xv) + 0.5, py(max_y));
    cairo_move_to(cr, px(0), py(yv) + 0.5);
    cairo_line_to(cr, px(max_x), py(yv) + 0.5);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, px(xv) + 0.5, py(0));
    cairo_line_to(cr, px(xv) + 0.5, py(0) + 5);
    cairo_move_to(cr, px(0) - 5, py(yv) + 0.5);
    cairo_line_to(cr, px(0), py(yv) + 0.5);
    cairo_stroke(cr);
    text_at(cr, px(xv), py(0) + 9, fmt::format("{:g}", xv), 0.5, 1.0);
    text_at(cr, px(0) - 9, py(yv), fmt::format("{:g}", yv), 1.0, 0.5);
  }
  // Axes.
  cairo_set_line_width(cr, 1.5);
  cairo_move_to(cr, px(0), py(max_y));
  cairo_line_to(cr, px(0), py(0));
  cairo_line_to(cr, px(max_x), py(0));
  cairo_stroke(cr);

  cairo_set_font_size(cr, 13);
  text_at(cr, px(max_x / 2), kHeight - 18, spec.x_label, 0.5, 0.0);
  cairo_save(cr);
  cairo_translate(cr, 22, py(max_y / 2));
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, 0, 0, spec.y_label, 0.5, 0.5);
  cairo_restore(cr);
  cairo_set_font_size(cr, 16);
  text_at(cr, kWidth / 2, 24, spec.title, 0.5, 0.5);

  // One curve per series, with a legend when there are several, right-aligned so that the
  // longest name ends inside the plot area.
  cairo_set_font_size(cr, 12);
  double widest = 0;
  for (const auto& s : spec.series) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s.name.c_str(), &e);
    widest = std::max(widest, e.x_advance);
  }
  const double legend_x = std::max(kLeft + 8, kWidth - kRight - 20 - widest);
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const double* rgb = kColors[i % std::size(kColors)];
    draw_curve(cr, spec.series[i].points, rgb, ax);
    if (spec.series.size() < 2) continue;
    const double ly = kTop + 8 + 18 * static_cast<double>(i);
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_rectangle(cr, legend_x, ly - 5, 14, 10);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_font_size(cr, 12);
    text_at(cr, legend_x + 20, ly, spec.series[i].name, 0.0, 0.5);
  }
}

Status finish(cairo_surface_t* surface, const std::string& path, bool png) {
  cairo_surface_flush(surface);
  cairo_status_t st = png ? cairo_surface_write_to_png(surface, path.c_str()) : cairo_surface_status(surface);
  cairo_surface_finish(surface);  // the SVG surface writes its file here
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (st != CAIRO_STATUS_SUCCESS) return io_error("{}: cannot write the chart: {}", path, cairo_status_to_string(st));
  return Status::ok();
}

}  // namespace

bool plot_format_supported(const std::string& path) {
  return ends_with(path, ".svg") || ends_with(path, ".png");
}

Status write_plot(const std::string& path, const PlotSpec& spec) {
  if (!plot_format_supported(path)) return invalid_argument("--plot: '{}' must end in .png or .svg", path);
  const bool png = ends_with(path, ".png");
  // PNG at twice the size (crisp on high-density screens); SVG in points.
  const double scale = png ? 2.0 : 1.0;
  cairo_surface_t* surface =
      png ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, static_cast<int>(kWidth * scale),
                                       static_cast<int>(kHeight * scale))
          : cairo_svg_surface_create(path.c_str(), kWidth, kHeight);
  if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
    const std::string why = cairo_status_to_string(cairo_surface_status(surface));
    cairo_surface_destroy(surface);
    return io_error("{}: cannot create the chart: {}", path, why);
  }
  cairo_t* cr = cairo_create(surface);
  cairo_scale(cr, scale, scale);
  draw_chart(cr, spec);
  cairo_destroy(cr);
  return finish(surface, path, png);
}

Status write_throughput_plot(const std::string& path, const std::string& mode,
                             const std::vector<nlohmann::json>& results) {
  // One curve per engine and prompt length (context), in the order measured; a point per batch size.
  std::set<std::string> engines;
  for (const auto& r : results) engines.insert(r.value("engine", std::string("DeepInfer")));
  PlotSpec spec;
  spec.title = engines.size() > 1 ? fmt::format("{}: total vs per-sequence throughput", mode)
                                  : fmt::format("DeepInfer {}: total vs per-sequence throughput", mode);
  spec.x_label = "tokens/s per sequence (per-user speed)";
  spec.y_label = "total tokens/s";
  for (const auto& r : results) {
    std::string name = fmt::format("{} prompt tokens", r.value("prompt_tokens", 0));
    if (engines.size() > 1) name = r.value("engine", std::string("DeepInfer")) + ", " + name;
    auto it = std::find_if(spec.series.begin(), spec.series.end(), [&](const PlotSeries& s) { return s.name == name; });
    if (it == spec.series.end()) it = spec.series.insert(spec.series.end(), PlotSeries{name, {}});
    it->points.push_back({r.value("per_seq_tokens_per_s", 0.0), r.value("tokens_per_s", 0.0),
                          fmt::format("batch {}", r.value("batch", 0))});
  }
  return write_plot(path, spec);
}

Result<std::vector<nlohmann::json>> read_plot_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("--plot-with: cannot open '{}'", path);
  std::vector<nlohmann::json> rows;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return invalid_argument("--plot-with: {} line {}: not a JSON object", path, n);
    for (const char* key : {"batch", "prompt_tokens", "tokens_per_s", "per_seq_tokens_per_s"})
      if (!j.contains(key) || !j[key].is_number())
        return invalid_argument("--plot-with: {} line {}: needs a number '{}'", path, n, key);
    if (j.contains("engine") && !j["engine"].is_string())
      return invalid_argument("--plot-with: {} line {}: 'engine' must be a string", path, n);
    rows.push_back(std::move(j));
  }
  if (rows.empty()) return invalid_argument("--plot-with: {} holds no rows", path);
  return rows;
}

Status write_spec_plot(const std::string& path, const std::vector<nlohmann::json>& results) {
  // One curve per task and configuration (off, fixed, dspark); a point per batch size.
  PlotSpec spec;
  spec.title = "DeepInfer speculative decoding: tokens/s by batch size";
  spec.x_label = "batch size (sequences)";
  spec.y_label = "total tokens/s (decode)";
  for (const auto& r : results) {
    const std::string name = r.value("task", std::string()) + ": " + r.value("config", std::string());
    auto it = std::find_if(spec.series.begin(), spec.series.end(), [&](const PlotSeries& s) { return s.name == name; });
    if (it == spec.series.end()) it = spec.series.insert(spec.series.end(), PlotSeries{name, {}});
    it->points.push_back({static_cast<double>(r.value("batch", 0)), r.value("tokens_per_s", 0.0), ""});
  }
  return write_plot(path, spec);
}

}  // namespace deepinfer::tools
