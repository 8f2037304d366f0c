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

}  // namespace
}  // namespace hanpu
