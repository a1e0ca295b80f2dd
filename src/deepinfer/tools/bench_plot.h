// Draws bench results as the trade-off chart DeepSeek publishes: per-sequence speed on x,
// total throughput on y, one point per batch size.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/base/status.h"

namespace deepinfer::tools {

bool plot_format_supported(const std::string& path);
Status write_throughput_plot(const std::string& path, const std::string& mode,
                             const std::vector<nlohmann::json>& results);

}  // namespace deepinfer::tools
