// The overlap-scheduling worker: runs one job at a time on its own thread (the CPU side of a
// step while the engine thread drives the forward on the pool). Jobs are short, so it sleeps.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace deepinfer::engine {

class StepWorker {
 public:
  StepWorker() : thread_([this] { loop(); }) {}
  ~StepWorker() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(std::function<void()> job) {
    {
      std::lock_guard lk(mu_);
      job_ = std::move(job);
      started_ = false;
    }
    cv_.notify_all();
  }
  // Returns once the job has run. If the worker has not picked it up yet (a busy machine can
  // keep a sleeping thread off the CPU for a while), the caller runs it itself.
  void wait() {
    std::unique_lock lk(mu_);
    if (job_ && !started_) {
      std::function<void()> job = std::move(job_);
      job_ = nullptr;
      lk.unlock();
      job();
      return;
    }
    cv_.wait(lk, [&] { return !job_; });
  }

 private:
  void loop() {
    // A lower priority, so that waking it never preempts the thread about to start a forward;
    // it should use spare cycles, and wait() takes the job back when there were none.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return (job_ && !started_) || stop_; });
      if (stop_) return;
      started_ = true;
      lk.unlock();
      job_();
      lk.lock();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;  // set while a job is queued or running
  bool started_ = false;       // the worker has taken job_
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace deepinfer::engine
