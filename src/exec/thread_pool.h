// A persistent pool of worker threads with static, deterministic work assignment: run(fn) calls fn(w)
// once for every worker w in [0, size()); the caller's thread is worker 0. Workers 1.. are pinned to
// CPUs (w mod the CPUs this process may use) so a worker keeps its cache between runs; the caller's
// thread is left as the caller set it (it belongs to the application: pinning it would change the
// application's scheduling after the call returns). Between runs a worker spins for a few tens of
// microseconds before sleeping, so back-to-back runs (decode steps) do not pay a sleep/wake round trip
// each. Jobs run with subnormals flushed to zero (exec/fp_mode.h).
//
// shared_pool(n) hands out pools of any size over ONE process-wide set of threads, grown to the largest
// size asked for: a run of size n wakes workers 1..n-1 only, so calls with different thread counts reuse
// the same pinned threads instead of each count keeping its own.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace hanpu {

// The CPUs this process may run on (sched_getaffinity), ascending; empty if unknown.
std::vector<int> allowed_cpus();
// Pins `t` to `cpu` (best effort: a failure leaves the thread unpinned).
void pin_thread(std::thread& t, int cpu);

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // a pool with threads of its own
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // Runs fn(worker) on every worker and returns when all have finished. Concurrent callers (of any pool
  // over the same threads) are served one at a time; fn must not call run() itself.
  void run(const std::function<void(int worker)>& fn);
  // Waits until every worker of the current run() has reached it (a phase barrier inside fn).
  void barrier();

  // Threads to use for a request of `threads` (0: all CPUs this process may use).
  static int resolve(int threads);

  struct Threads;  // the worker threads and their hand-off state (thread_pool.cpp)

 private:
  friend ThreadPool& shared_pool(int threads);
  ThreadPool(std::shared_ptr<Threads> t, int size) : t_(std::move(t)), size_(size) {}
  std::shared_ptr<Threads> t_;
  int size_;
};

// A pool of the given size over the process-wide threads (created or grown on first use).
ThreadPool& shared_pool(int threads);

}  // namespace hanpu
