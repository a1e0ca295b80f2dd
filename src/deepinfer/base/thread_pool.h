// A persistent pool of worker threads for the per-layer compute path: no thread creation, no
// allocation and no locks per call; workers spin briefly, then sleep on a futex. Work items are
// claimed, not assigned: a thread that the OS has descheduled (other processes on the cores)
// delays nothing it has not started, because the running threads take its items.
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

  // Runs fn(i, num_threads) once for every i in [0, num_threads), on whichever threads claim
  // them (usually one each; the caller's thread takes part and takes over items that idle
  // workers have not claimed); returns when all have finished. fn must not wait for another
  // index to run (no barriers inside).
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
  // Claims the next item of the current run and runs it; false when none is left.
  bool run_claimed_item();
  void worker_loop();

  int num_threads_;
  std::vector<std::thread> workers_;
  RawFn fn_ = nullptr;  // written before claim_ is published, read only after a claim succeeds
  void* ctx_ = nullptr;
  std::atomic<uint32_t> generation_{0};  // bumped per run to wake sleeping workers
  std::atomic<uint64_t> claim_{0};       // (items << 32) | next item of the current run
  std::atomic<uint32_t> done_{0};        // items of the current run finished
  std::atomic<bool> stop_{false};
};

}  // namespace deepinfer
