// File naming for shards and temps.
#include "deepinfer/kvstore/layout.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

#include <fmt/format.h>

namespace deepinfer::kvstore {

std::string subdir_path(const std::string& target, const BlockKey& key) {
  return fmt::format("{}/{}/{}", target, kLayoutDir, to_hex(key).substr(0, 2));
}

std::string shard_path(const std::string& target, const BlockKey& key, int shard) {
  std::string hex = to_hex(key);
  return fmt::format("{}/{}/{}/{}.{}", target, kLayoutDir, hex.substr(0, 2), hex, shard);
}

std::string temp_shard_path(const std::string& target, const BlockKey& key, int shard) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string hex = to_hex(key);
  return fmt::format("{}/{}/{}/.tmp.{}.{}.{}.{}.{:016x}", target, kLayoutDir, hex.substr(0, 2),
                     hex, shard, host_tag(), static_cast<long>(::getpid()), rng());
}

bool parse_shard_name(std::string_view name, BlockKey* key, int* shard) {
  if (name.size() < 66 || name[64] != '.' || !from_hex(name.substr(0, 64), key)) return false;
  std::string_view idx = name.substr(65);
  if (idx.empty() || idx.size() > 3) return false;
  int v = 0;
  for (char c : idx) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *shard = v;
  return true;
}

bool parse_temp_name(std::string_view name, std::string* host, long* pid) {
  if (name.substr(0, 5) != ".tmp.") return false;
  // Fields after the prefix: hex, shard, host, pid, rand.
  std::string_view rest = name.substr(5);
  std::string_view parts[5];
  for (int i = 0; i < 5; ++i) {
    size_t dot = rest.find('.');
    if (i < 4 && dot == std::string_view::npos) return false;
    parts[i] = rest.substr(0, dot);
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  *host = std::string(parts[2]);
  *pid = std::strtol(std::string(parts[3]).c_str(), nullptr, 10);
  return *pid > 0;
}

const std::string& host_tag() {
  static const std::string tag = [] {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    std::string s;
    for (char* p = buf; *p; ++p) {
      char c = *p;
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      s.push_back(ok ? c : '-');
    }
    return s.empty() ? std::string("host") : s;
  }();
  return tag;
}

}  // namespace deepinfer::kvstore
