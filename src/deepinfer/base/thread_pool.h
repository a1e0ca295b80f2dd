// A persistent pool of worker threads for the per-layer compute path: no thread creation, no
// allocation and no locks per call; workers spin briefly, then sleep on a futex.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  // num_threads counts the calling thread, which always takes part (index 0). 0 = one per core.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(thread_index, num_threads) once on every thread; returns when all have finished.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_raw([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &fn);
  }

  // Splits [0, n) into num_threads contiguous ranges (aligned to `grain`) and calls
  // fn(begin, end) for each non-empty one.
  template <typename F>
  void parallel_for(int64_t n, F&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int i, int nt) {
      int64_t chunks = (n + grain - 1) / grain;
      int64_t c0 = chunks * i / nt, c1 = chunks * (i + 1) / nt;
      int64_t b = c0 * grain, e = std::min(n, c1 * grain);
      if (b < e) fn(b, e);
    });
  }

  static int default_num_threads();

 private:
  using RawFn = void (*)(void*, int, int);
  void run_raw(RawFn fn, void* ctx);
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  RawFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace deepinfer
