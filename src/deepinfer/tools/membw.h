// Measures this machine's memory read bandwidth (the decode roofline): threads sum disjoint
// slices of a buffer much larger than the caches.
#pragma once

#include <cstddef>

namespace deepinfer::tools {

// GB/s (1e9 bytes) read by `threads` threads; best of `repeats` passes over `bytes`.
double measure_read_bandwidth_gbs(int threads, size_t bytes = size_t{1} << 30, int repeats = 5);

}  // namespace deepinfer::tools
