#include "deepinfer/base/memory_info.h"

#include <fstream>
#include <sstream>

namespace deepinfer {

std::optional<size_t> parse_mem_available(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    size_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<size_t> available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  if (!f) return std::nullopt;
  std::stringstream text;
  text << f.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace deepinfer
