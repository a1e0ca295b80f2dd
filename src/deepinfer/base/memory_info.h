// What the operating system says about memory, for checks made before a big allocation.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace deepinfer {

// MemAvailable from /proc/meminfo in bytes (memory that can be given to new allocations without
// swapping); nullopt where the file or the field is missing.
std::optional<size_t> available_memory_bytes();
// The same, read from a meminfo-format text (for tests).
std::optional<size_t> parse_mem_available(const std::string& meminfo);

// The largest CPU cache of cpu0 in bytes (the last level), from
// /sys/devices/system/cpu/cpu0/cache/index*/size; nullopt where sysfs does not say.
std::optional<size_t> largest_cache_bytes();
// One sysfs cache size ("491520K", "2M", "512"); nullopt when it is not one.
std::optional<size_t> parse_cache_size(const std::string& text);

}  // namespace deepinfer
