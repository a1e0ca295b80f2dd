#include "deepinfer/tools/membw.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/base/timer.h"

namespace deepinfer::tools {

double measure_read_bandwidth_gbs(int threads, size_t bytes, int repeats) {
  const size_t n = bytes / sizeof(int64_t);
  AlignedBuffer<int64_t> buf(n);
  ThreadPool pool(threads);
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = i;  // first touch by the reading thread
  }, 1 << 16);
  std::vector<int64_t> sums(threads * 8, 0);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_seconds();
    pool.run([&](int t, int nt) {
      const size_t b = n * t / nt, e = n * (t + 1) / nt;
      // Four independent 128-bit accumulators keep the loads, not the adds, the bottleneck.
      __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
      size_t i = b;
      for (; i + 8 <= e; i += 8) {
        const __m128i* p = reinterpret_cast<const __m128i*>(buf.data() + i);
        a0 = _mm_add_epi64(a0, _mm_load_si128(p));
        a1 = _mm_add_epi64(a1, _mm_load_si128(p + 1));
        a2 = _mm_add_epi64(a2, _mm_load_si128(p + 2));
        a3 = _mm_add_epi64(a3, _mm_load_si128(p + 3));
      }
      int64_t s[2];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(s), _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
      int64_t total = s[0] + s[1];
      for (; i < e; ++i) total += buf[i];
      sums[t * 8] = total;  // keeps the loop from being optimized away
    });
    const double secs = now_seconds() - t0;
    best = std::max(best, static_cast<double>(n * sizeof(int64_t)) / secs / 1e9);
  }
  return sums[0] == -1 ? 0 : best;
}

}  // namespace deepinfer::tools
