// Minimal leveled logging to stderr. Level from DEEPINFER_LOG (error|warn|info|debug).
#pragma once

#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace deepinfer::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

Level current_level();
void set_level(Level level);
void write(Level level, const std::string& message);

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) {
  if (current_level() >= Level::kError) write(Level::kError, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) {
  if (current_level() >= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) {
  if (current_level() >= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) {
  if (current_level() >= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(a)...));
}

}  // namespace deepinfer::log
