// `--kv-store-ttl agent=3d,chat=7d`: per-traffic-class lifetimes of KV store entries.
#pragma once

#include <cstdint>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/kvstore/traffic_class.h"

namespace deepinfer::kvstore {

// Parses "CLASS=DURATION[,CLASS=DURATION]" (durations: an integer with s, m, h or d; a bare
// integer is seconds) into ttl_seconds; classes not named keep their value. Errors name the part.
Status parse_ttl_spec(std::string_view spec, int64_t (&ttl_seconds)[kNumTrafficClasses]);

}  // namespace deepinfer::kvstore
