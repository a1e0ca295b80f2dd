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

}  // namespace deepinfer
