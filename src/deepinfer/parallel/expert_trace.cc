// Expert load traces (expert_trace.h): JSON in and out, and the recorder of step windows.
#include "deepinfer/parallel/expert_trace.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace deepinfer::parallel {
namespace {

using Rows = std::vector<std::vector<uint64_t>>;

Rows minus(const Rows& a, const Rows& b) {
  Rows d = a;
  for (size_t l = 0; l < d.size() && l < b.size(); ++l)
    for (size_t e = 0; e < d[l].size() && e < b[l].size(); ++e) d[l][e] -= b[l][e];
  return d;
}

Status check_counts(const nlohmann::json& j, size_t layers, int experts, const std::string& what) {
  if (!j.is_array() || j.size() != layers)
    return corrupt("{}: want {} rows (one per layer)", what, layers);
  for (const auto& row : j) {
    if (!row.is_array() || row.size() != size_t(experts))
      return corrupt("{}: each row needs {} expert counts", what, experts);
    for (const auto& v : row)
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        return corrupt("{}: counts must be integers >= 0", what);
  }
  return Status::ok();
}

}  // namespace

std::string expert_trace_to_json(const ExpertTrace& t) {
  nlohmann::json j;
  j["format"] = "deepinfer-expert-trace";
  j["version"] = 1;
  j["model"] = t.model;
  j["num_experts"] = t.num_experts;
  j["num_groups"] = t.num_groups;
  j["layers"] = t.layers;
  j["total"] = t.total;
  j["window_steps"] = t.window_steps;
  j["windows"] = t.windows;
  return j.dump() + "\n";
}

Result<ExpertTrace> read_expert_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("{}: cannot open the expert trace", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("{}: not valid JSON", path);
  if (!j.is_object() || j.value("format", "") != "deepinfer-expert-trace")
    return corrupt("{}: not an expert trace (want \"format\": \"deepinfer-expert-trace\")", path);
  ExpertTrace t;
  try {
    t.model = j.value("model", "");
    t.num_experts = j.at("num_experts").get<int>();
    t.num_groups = j.value("num_groups", 1);
    t.layers = j.at("layers").get<std::vector<int>>();
    t.window_steps = j.value("window_steps", 0);
  } catch (const nlohmann::json::exception& e) {
    return corrupt("{}: {}", path, e.what());
  }
  if (t.num_experts <= 0 || t.num_groups <= 0 || t.layers.empty())
    return corrupt("{}: needs num_experts > 0, num_groups > 0 and at least one layer", path);
  DI_RETURN_IF_ERROR(
      check_counts(j.at("total"), t.layers.size(), t.num_experts, path + ": \"total\""));
  t.total = j.at("total").get<ExpertCounts>();
  if (j.contains("windows")) {
    if (!j["windows"].is_array()) return corrupt("{}: \"windows\" must be an array", path);
    for (const auto& w : j["windows"]) {
      DI_RETURN_IF_ERROR(check_counts(w, t.layers.size(), t.num_experts, path + ": a window"));
      t.windows.push_back(w.get<ExpertCounts>());
    }
  }
  return t;
}

void ExpertTraceRecorder::step(const Rows& running) {
  if (window_steps_ <= 0 || ++steps_in_window_ < window_steps_) return;
  windows_.push_back(minus(running, at_window_start_));
  at_window_start_ = running;
  steps_in_window_ = 0;
}

ExpertTrace ExpertTraceRecorder::finish(const Rows& running) {
  ExpertTrace t;
  t.model = model_;
  t.num_groups = num_groups_;
  t.window_steps = window_steps_;
  t.num_experts = running.empty() ? 0 : static_cast<int>(running[0].size());
  std::vector<size_t> kept;
  for (size_t l = 0; l < running.size(); ++l) {
    uint64_t sum = 0;
    for (uint64_t v : running[l]) sum += v;
    if (sum > 0) kept.push_back(l), t.layers.push_back(static_cast<int>(l));
  }
  for (size_t l : kept) t.total.push_back(running[l]);
  for (const Rows& w : windows_) {
    ExpertCounts c;
    for (size_t l : kept) c.push_back(w[l]);
    t.windows.push_back(std::move(c));
  }
  return t;
}

}  // namespace deepinfer::parallel
