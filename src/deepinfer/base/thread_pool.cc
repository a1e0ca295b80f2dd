#include "deepinfer/base/thread_pool.h"

#include <immintrin.h>
#include <climits>
#include <cstdint>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace deepinfer {

namespace {
constexpr int kSpinIterations = 20000;

// Raw futex calls: libstdc++ 12's std::atomic::wait can lose wake-ups under this pattern.
void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}
}  // namespace

int ThreadPool::default_num_threads() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : default_num_threads()) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&generation_);
  for (auto& t : workers_) t.join();
}

bool ThreadPool::run_claimed_item() {
  // A claim that lands after this run's last item, or between runs, gets an index past the item
  // count and touches nothing else. A successful claim belongs to the run whose publication it
  // read (acquire), so fn_/ctx_ are that run's, and the run cannot end before the item is done.
  const uint64_t c = claim_.fetch_add(1, std::memory_order_acq_rel);
  const uint32_t index = static_cast<uint32_t>(c), items = static_cast<uint32_t>(c >> 32);
  if (index >= items) return false;
  fn_(ctx_, static_cast<int>(index), static_cast<int>(items));
  done_.fetch_add(1, std::memory_order_release);
  return true;
}

void ThreadPool::run_raw(RawFn fn, void* ctx) {
  if (num_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  const auto items = static_cast<uint32_t>(num_threads_);
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  claim_.store(uint64_t{items} << 32, std::memory_order_release);  // publishes fn_, ctx_
  generation_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&generation_);
  while (run_claimed_item()) {
  }
  // Only items other threads are running remain.
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != items) {
    if (++spins < kSpinIterations) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;  // the generation at construction; a run may start before we get here
  for (;;) {
    int spins = 0;
    uint32_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        _mm_pause();
      } else {
        futex_wait(&generation_, seen);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    while (run_claimed_item()) {
    }
  }
}

}  // namespace deepinfer
