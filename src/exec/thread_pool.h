// A persistent pool of worker threads with static, deterministic work assignment: run(fn) calls fn(w)
// once for every worker w in [0, size()); the caller's thread is worker 0. Workers 1.. are pinned to
// CPUs (w mod the CPUs this process may use) so a worker keeps its cache between runs. Between runs a
// worker spins for a few tens of microseconds before sleeping, so back-to-back runs (decode steps)
// do not pay a sleep/wake round trip each. Jobs run with subnormals flushed to zero (exec/fp_mode.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hanpu {

// The CPUs this process may run on (sched_getaffinity), ascending; empty if unknown.
std::vector<int> allowed_cpus();
// Pins `t` to `cpu` (best effort: a failure leaves the thread unpinned).
void pin_thread(std::thread& t, int cpu);

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(worker) on every worker and returns when all have finished. Concurrent callers are served
  // one at a time; fn must not call run() on the same pool.
  void run(const std::function<void(int worker)>& fn);
  // Waits until every worker of the current run() has reached it (a phase barrier inside fn).
  void barrier();

  // Threads to use for a request of `threads` (0: all CPUs this process may use).
  static int resolve(int threads);

 private:
  void worker_loop(int w);

  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one run() at a time
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_, barrier_cv_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int barrier_waiting_ = 0;
  uint64_t barrier_generation_ = 0;
};

// A process-wide pool of the given size, created on first use and reused afterwards.
ThreadPool& shared_pool(int threads);

}  // namespace hanpu
