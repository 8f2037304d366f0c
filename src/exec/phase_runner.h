// Runs an execution plan's mapping on the thread pool exactly as it says: phases grouped into launches (a
// launch phase starts one pool run, a barrier phase continues the run after pool.barrier()), worker t
// running its items of each phase in the mapping's order.
#pragma once

#include <vector>

#include "exec/thread_pool.h"
#include "plan/mapping.h"

namespace hanpu {

class PhaseRunner {
 public:
  explicit PhaseRunner(const plan::Mapping& m) : m_(m), mine_(m.phases.size(), std::vector<std::vector<const plan::WorkItem*>>(m.shape.workers)) {
    for (const plan::WorkItem& it : m.items) mine_[it.phase][it.worker].push_back(&it);
  }

  // Worker t's items of phase p, in order.
  const std::vector<const plan::WorkItem*>& items(int p, int t) const { return mine_[p][t]; }

  // Runs phases [first, last) (the first must be a launch) as launches on `pool` (its size must be the
  // mapping's workers): fn(phase, worker, item) for every item.
  template <typename Fn>
  void run(ThreadPool& pool, int first, int last, const Fn& fn) const {
    for (int p = first; p < last;) {
      int end = p + 1;
      while (end < last && m_.phases[end].sync == plan::Sync::kBarrier) ++end;
      pool.run([&](int t) {
        for (int q = p; q < end; ++q) {
          if (q > p) pool.barrier();
          for (const plan::WorkItem* it : mine_[q][t]) fn(q, t, *it);
        }
      });
      p = end;
    }
  }

 private:
  const plan::Mapping& m_;
  std::vector<std::vector<std::vector<const plan::WorkItem*>>> mine_;  // [phase][worker]
};

}  // namespace hanpu
