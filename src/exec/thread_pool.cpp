#include "exec/thread_pool.h"

#include "exec/fp_mode.h"

#include <pthread.h>
#include <sched.h>

#include <map>
#include <memory>

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

ThreadPool::ThreadPool(int threads) {
  const std::vector<int> cpus = allowed_cpus();
  for (int w = 1; w < std::max(1, threads); ++w) {
    workers_.emplace_back([this, w] { worker_loop(w); });
    if (!cpus.empty()) pin_thread(workers_.back(), cpus[w % cpus.size()]);
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
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

void ThreadPool::worker_loop(int w) {
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen && !stop_; ++i) cpu_relax();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    {
      ScopedFlushDenormals ftz;
      (*job_)(w);
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // pairs with the waiter's predicate check
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  job_ = &fn;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  {
    ScopedFlushDenormals ftz;  // the caller's own mode comes back when its share is done
    fn(0);
  }
  for (int i = 0; i < kSpins && pending_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  job_ = nullptr;
}

void ThreadPool::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = barrier_generation_;
  if (++barrier_waiting_ == size()) {
    barrier_waiting_ = 0;
    ++barrier_generation_;
    barrier_cv_.notify_all();
    return;
  }
  barrier_cv_.wait(lock, [&] { return barrier_generation_ != gen; });
}

ThreadPool& shared_pool(int threads) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

}  // namespace hanpu
