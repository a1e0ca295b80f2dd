#include "deepinfer/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        }, grain);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ThreadPool, RunCallsEveryThreadIndex) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 1000; ++rep) {
    std::atomic<int> mask{0};
    pool.run([&](int i, int n) {
      EXPECT_EQ(n, 3);
      mask.fetch_or(1 << i);
    });
    ASSERT_EQ(mask.load(), 7);
  }
}

// More threads than cores: workers are often descheduled when a run starts, so items are claimed
// by whoever runs. Every index must still run exactly once per run, and its plain (non-atomic)
// writes must be visible to the caller when run() returns.
TEST(ThreadPool, OversubscribedRunsEveryItemOnceAndPublishesItsWrites) {
  ThreadPool pool(8);
  std::vector<int64_t> value(8, 0);
  for (int rep = 1; rep <= 20000; ++rep) {
    pool.run([&](int i, int n) {
      ASSERT_EQ(n, 8);
      value[i] += i + rep;  // each index is run by one thread per run
    });
    for (int i = 0; i < 8; ++i) {
      int64_t want = int64_t{rep} * i + int64_t{rep} * (rep + 1) / 2;
      ASSERT_EQ(value[i], want) << "rep " << rep << " index " << i;
    }
  }
}

}  // namespace
}  // namespace deepinfer
