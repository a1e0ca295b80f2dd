// Software prefetches for the kernels' streams. Where a kernel walks memory faster than the
// hardware prefetchers ramp up (a batch-1 matmul multiplies a weight row in less time than a
// cache line takes to come from memory; decode attention's KV rows sit in scattered blocks),
// asking for the lines ahead keeps enough of them in flight. A prefetch never faults and
// changes no result.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::kernels {

// How far ahead of the weight row being multiplied a matmul requests its weight stream
// (1-8 KiB measured the same at batch 1 on the AVX-512 development host; docs/benchmarks.md).
inline constexpr int64_t kWeightPrefetchBytes = 4096;

// asm statements because GCC 12 at -O2 drops __builtin_prefetch from a helper it does not
// inline (no side effects to keep), silently losing the prefetch.
inline void prefetch_l1(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

inline void prefetch_l2(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// Every cache line of [p, p + bytes), with Prefetch (prefetch_l1 or prefetch_l2).
template <void (*Prefetch)(const void*)>
inline void prefetch_range(const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t x = a & ~uintptr_t{63}; x < a + bytes; x += 64)
    Prefetch(reinterpret_cast<const void*>(x));
}

// The weight row after `row` by kWeightPrefetchBytes (rows are contiguous in a matrix).
inline void prefetch_weight_row(const uint8_t* row, size_t row_bytes) {
  prefetch_range<prefetch_l1>(row + kWeightPrefetchBytes, row_bytes);
}

}  // namespace deepinfer::kernels
