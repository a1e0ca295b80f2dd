// Expert load traces: tokens routed to each expert of each MoE layer, in total and per window of
// engine steps, as recorded by `deepinfer generate --expert-trace` and read by `deepinfer eplb
// plan`. One JSON file (format in docs/parallel.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::parallel {

using ExpertCounts = std::vector<std::vector<uint64_t>>;  // [moe layer][expert]

struct ExpertTrace {
  std::string model;  // what it was recorded on (free text)
  int num_experts = 0;
  int num_groups = 1;       // the model's expert groups (n_group)
  std::vector<int> layers;  // model layer index of each row
  ExpertCounts total;
  int window_steps = 0;  // engine steps per window (0 = no windows)
  std::vector<ExpertCounts> windows;
};

std::string expert_trace_to_json(const ExpertTrace& t);
// NotFound when the file is missing; Corrupt (naming the file and the field) when it is not a
// well-formed trace.
Result<ExpertTrace> read_expert_trace(const std::string& path);

// Builds a trace from the engine's running per-layer counters (rows = model layers, dense ones
// all zero): keeps the layers that routed any token; a window closes every window_steps calls
// of step().
class ExpertTraceRecorder {
 public:
  ExpertTraceRecorder(std::string model, int num_groups, int window_steps)
      : model_(std::move(model)), num_groups_(num_groups), window_steps_(window_steps) {}
  void step(const std::vector<std::vector<uint64_t>>& running_counts);
  ExpertTrace finish(const std::vector<std::vector<uint64_t>>& running_counts);

 private:
  std::string model_;
  int num_groups_;
  int window_steps_;
  int steps_in_window_ = 0;
  std::vector<std::vector<uint64_t>> at_window_start_;
  std::vector<std::vector<std::vector<uint64_t>>> windows_;  // full model rows
};

}  // namespace deepinfer::parallel
