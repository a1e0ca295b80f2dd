#include "deepinfer/base/memory_info.h"

#include <algorithm>
#include <cctype>
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

std::optional<size_t> parse_cache_size(const std::string& text) {
  size_t i = 0, value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (value > (size_t{1} << 40)) return std::nullopt;
    value = value * 10 + static_cast<size_t>(text[i++] - '0');
  }
  if (i == 0) return std::nullopt;
  size_t scale = 1;
  if (i < text.size() && (text[i] == 'K' || text[i] == 'M' || text[i] == 'G')) {
    scale = text[i] == 'K' ? size_t{1} << 10 : text[i] == 'M' ? size_t{1} << 20 : size_t{1} << 30;
    ++i;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return std::nullopt;
  return value * scale;
}

std::optional<size_t> largest_cache_bytes() {
  std::optional<size_t> largest;
  for (int index = 0; index < 16; ++index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    if (!f) continue;
    std::string text;
    std::getline(f, text);
    if (const auto bytes = parse_cache_size(text)) largest = std::max(largest.value_or(0), *bytes);
  }
  return largest;
}

}  // namespace deepinfer
