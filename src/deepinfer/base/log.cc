#include "deepinfer/base/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace deepinfer::log {
namespace {
Level level_from_env() {
  const char* v = std::getenv("DEEPINFER_LOG");
  if (!v) return Level::kWarn;
  if (!std::strcmp(v, "error")) return Level::kError;
  if (!std::strcmp(v, "info")) return Level::kInfo;
  if (!std::strcmp(v, "debug")) return Level::kDebug;
  return Level::kWarn;
}
std::atomic<int> g_level{static_cast<int>(level_from_env())};
std::mutex g_mu;
}  // namespace

Level current_level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }
void set_level(Level level) { g_level.store(static_cast<int>(level)); }
void write(Level level, const std::string& message) {
  static const char* kNames[] = {"error", "warn", "info", "debug"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%s] %s\n", kNames[static_cast<int>(level)], message.c_str());
}

}  // namespace deepinfer::log
