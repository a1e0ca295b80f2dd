// A mutex for critical sections of a few hundred nanoseconds that two busy threads contend
// for: a waiter spins (with a pause hint) instead of sleeping in the kernel, then yields its
// core if the holder is slow. A blocked std::mutex waiter sleeps on a futex, and the wake-up
// costs tens of microseconds on a virtual machine, far more than the section it waited for
// (a grammar's context cache, looked up by every mask while the background precompute
// inserts into it). Satisfies Lockable (std::lock_guard, std::unique_lock).
#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace deepinfer::base {

class SpinMutex {
 public:
  void lock() {
    for (int spins = 0;; ++spins) {
      if (!held_.load(std::memory_order_relaxed) &&
          !held_.exchange(true, std::memory_order_acquire))
        return;
      if (spins < kSpinsBeforeYield) {
        pause();
      } else {
        std::this_thread::yield();  // the holder may have lost its core: let it run
      }
    }
  }
  bool try_lock() {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  // ~2,000 pauses are tens of microseconds: longer than any section this is meant for.
  static constexpr int kSpinsBeforeYield = 2000;
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
  }
  std::atomic<bool> held_{false};
};

}  // namespace deepinfer::base
