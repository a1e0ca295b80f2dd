// SpinMutex excludes: threads that add to a plain counter under it lose no update, and
// try_lock fails while another thread holds it.
#include "deepinfer/base/spin_mutex.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::base {
namespace {

TEST(SpinMutex, ThreadsLoseNoUpdate) {
  SpinMutex mu;
  int64_t counter = 0;  // not atomic: only the lock keeps the increments whole
  constexpr int kThreads = 4, kAdds = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) {
        std::lock_guard<SpinMutex> lock(mu);
        counter = counter + 1;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kAdds);
}

TEST(SpinMutex, TryLockFailsWhileHeld) {
  SpinMutex mu;
  ASSERT_TRUE(mu.try_lock());
  bool other_got_it = true;
  std::thread([&] { other_got_it = mu.try_lock(); }).join();
  EXPECT_FALSE(other_got_it);
  mu.unlock();
  std::thread([&] {
    other_got_it = mu.try_lock();
    if (other_got_it) mu.unlock();
  }).join();
  EXPECT_TRUE(other_got_it);
}

}  // namespace
}  // namespace deepinfer::base
