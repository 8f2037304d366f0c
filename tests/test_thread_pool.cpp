// Pools of different sizes over the shared threads: every worker of a run is called exactly once, workers
// beyond a run's size are not, barriers count only the run's workers, and the threads are reused.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "exec/thread_pool.h"

namespace hanpu {
namespace {

TEST(ThreadPool, SharedPoolsOfAnySizeRunEachWorkerOnceAndBarrierTogether) {
  for (int n : {3, 1, 5, 2, 5, 3}) {
    ThreadPool& pool = shared_pool(n);
    ASSERT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> calls(8);
    std::atomic<int> before{0}, after_ok{0};
    pool.run([&](int w) {
      ++calls[w];
      ++before;
      pool.barrier();  // everyone has incremented `before` by now
      if (before.load() == n) ++after_ok;
    });
    for (int w = 0; w < 8; ++w) EXPECT_EQ(calls[w].load(), w < n ? 1 : 0) << "size " << n << " worker " << w;
    EXPECT_EQ(after_ok.load(), n) << "size " << n;
  }
  EXPECT_EQ(&shared_pool(3), &shared_pool(3));  // one handle per size, over the same threads
}

// Back-to-back runs of alternating sizes: a worker left out of one run must not join the next one twice.
// (It once could: it read a run's generation and the next run's size separately, joined the next run early
// and then again at its generation; a barrier inside the job then never filled — a hang seen under TSan.)
TEST(ThreadPool, BackToBackRunsOfAlternatingSizesCallEachWorkerOnce) {
  const int sizes[] = {2, 5, 1, 4, 3, 5};
  std::vector<std::atomic<int>> calls(8);
  for (int i = 0; i < 3000; ++i) {
    const int n = sizes[i % 6];
    ThreadPool& pool = shared_pool(n);
    for (auto& c : calls) c.store(0);
    pool.run([&](int w) { ++calls[w]; });
    for (int w = 0; w < 8; ++w) {
      ASSERT_EQ(calls[w].load(), w < n ? 1 : 0) << "run " << i << ", size " << n << ", worker " << w;
    }
  }
}

}  // namespace
}  // namespace hanpu
