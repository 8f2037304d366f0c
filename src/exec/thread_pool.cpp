#include "exec/thread_pool.h"

#include "exec/fp_mode.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace hanpu {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

void pin_thread(std::thread& t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(t.native_handle(), sizeof set, &set);  // best effort
}

int ThreadPool::resolve(int threads) {
  if (threads > 0) return threads;
  const std::size_t n = allowed_cpus().size();
  return n > 0 ? static_cast<int>(n) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

// About 40 us of polling (a pause is tens of cycles) before a thread falls back to sleeping.
constexpr int kSpins = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

// The threads behind one or more pools. A run names how many workers take part; the others stay asleep.
struct ThreadPool::Threads {
  std::vector<std::thread> workers;  // worker w is workers[w - 1]
  std::mutex run_mu;                 // one run at a time; also held while growing
  std::mutex mu;
  std::condition_variable start_cv, done_cv, barrier_cv;
  const std::function<void(int)>* job = nullptr;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  int active = 1;  // workers of the current run (read and written under mu)
  std::atomic<bool> stop{false};
  int barrier_waiting = 0;
  uint64_t barrier_generation = 0;

  // Adds workers up to `threads` (run_mu held by the caller).
  void grow(int threads) {
    const std::vector<int> cpus = allowed_cpus();
    for (int w = static_cast<int>(workers.size()) + 1; w < threads; ++w) {
      const uint64_t seen = generation.load(std::memory_order_acquire);  // no run in flight: none to join
      workers.emplace_back([this, w, seen] { loop(w, seen); });
      if (!cpus.empty()) pin_thread(workers.back(), cpus[w % cpus.size()]);
    }
  }

  ~Threads() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    start_cv.notify_all();
    for (auto& t : workers) t.join();
  }

  void loop(int w, uint64_t seen) {
    for (;;) {
      for (int i = 0; i < kSpins && generation.load(std::memory_order_acquire) == seen && !stop; ++i) cpu_relax();
      // The run to join, read as one snapshot under mu (run() publishes job, active and generation together):
      // read separately, a worker outside run A could see A's generation but the next run B's size, join B
      // and then join it again at B's generation (twice into one run: a barrier that never fills, a count
      // that ends early).
      const std::function<void(int)>* my_job = nullptr;
      int my_active = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        start_cv.wait(lock, [&] { return stop || generation.load(std::memory_order_acquire) != seen; });
        if (stop) return;
        seen = generation.load(std::memory_order_acquire);
        my_job = job;
        my_active = active;
      }
      if (w >= my_active) continue;  // not part of this run
      {
        ScopedFlushDenormals ftz;
        (*my_job)(w);
      }
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu);  // pairs with the waiter's predicate check
        done_cv.notify_one();
      }
    }
  }

  void run(const std::function<void(int)>& fn, int size) {
    std::lock_guard<std::mutex> run_lock(run_mu);
    {
      std::lock_guard<std::mutex> lock(mu);  // the run's snapshot: see loop()
      job = &fn;
      active = size;
      pending.store(size - 1, std::memory_order_relaxed);
      generation.fetch_add(1, std::memory_order_release);
    }
    if (size > 1) start_cv.notify_all();
    {
      ScopedFlushDenormals ftz;  // the caller's own mode comes back when its share is done
      fn(0);
    }
    for (int i = 0; i < kSpins && pending.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
    if (pending.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(mu);
      done_cv.wait(lock, [&] { return pending.load(std::memory_order_acquire) == 0; });
    }
    std::lock_guard<std::mutex> lock(mu);
    job = nullptr;
  }

  void barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = barrier_generation;
    if (++barrier_waiting == active) {
      barrier_waiting = 0;
      ++barrier_generation;
      barrier_cv.notify_all();
      return;
    }
    barrier_cv.wait(lock, [&] { return barrier_generation != gen; });
  }
};

ThreadPool::ThreadPool(int threads) : t_(std::make_shared<Threads>()), size_(std::max(1, threads)) {
  std::lock_guard<std::mutex> lock(t_->run_mu);
  t_->grow(size_);
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::run(const std::function<void(int)>& fn) { t_->run(fn, size_); }

void ThreadPool::barrier() { t_->barrier(); }

ThreadPool& shared_pool(int threads) {
  static std::mutex mu;
  static const auto shared = std::make_shared<ThreadPool::Threads>();
  static std::map<int, std::unique_ptr<ThreadPool>> pools;  // sized views: no threads of their own
  threads = std::max(1, threads);
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[threads];
  if (!p) {
    {
      std::lock_guard<std::mutex> grow_lock(shared->run_mu);  // no run in flight while threads are added
      shared->grow(threads);
    }
    p.reset(new ThreadPool(shared, threads));
  }
  return *p;
}

}  // namespace hanpu
