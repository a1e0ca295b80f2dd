// Parsing of per-class TTL specs.
#include "deepinfer/kvstore/ttl_spec.h"

#include <string>

namespace deepinfer::kvstore {

Status parse_ttl_spec(std::string_view spec, int64_t (&ttl_seconds)[kNumTrafficClasses]) {
  int64_t out[kNumTrafficClasses];
  std::copy(std::begin(ttl_seconds), std::end(ttl_seconds), out);
  if (spec.empty()) return invalid_argument("--kv-store-ttl: empty (expected e.g. agent=3d,chat=7d)");
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view part = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      return invalid_argument("--kv-store-ttl: '{}' is not CLASS=DURATION", part);
    const auto cls = traffic_class_from_name(part.substr(0, eq));
    if (!cls) return invalid_argument("--kv-store-ttl: unknown class '{}' (agent or chat)", part.substr(0, eq));
    std::string_view num = part.substr(eq + 1);
    int64_t unit = 1;
    if (!num.empty()) {
      switch (num.back()) {
        case 's': unit = 1; num.remove_suffix(1); break;
        case 'm': unit = 60; num.remove_suffix(1); break;
        case 'h': unit = 3600; num.remove_suffix(1); break;
        case 'd': unit = 86400; num.remove_suffix(1); break;
        default: break;
      }
    }
    int64_t v = 0;
    bool ok = !num.empty() && num.size() <= 9;
    for (char c : num) {
      ok = ok && c >= '0' && c <= '9';
      v = v * 10 + (c - '0');
    }
    if (!ok || v <= 0)
      return invalid_argument("--kv-store-ttl: '{}' needs a positive whole duration like 3d, 12h, 90m", part);
    out[static_cast<int>(*cls)] = v * unit;
  }
  std::copy(std::begin(out), std::end(out), ttl_seconds);
  return Status::ok();
}

}  // namespace deepinfer::kvstore
