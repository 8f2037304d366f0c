// The host executor of the runtime (fuse/runtime.h): the scheduler's plan on pinned worker threads.
//
// One worker per lane: matrix on the first allowed CPU, vector and DMA on the second (on a 2-core
// machine a core for the matrix unit and one for the rest), the control lane on the calling thread. A
// worker sleeps until a stage of its lane is ready, takes the lowest-numbered one (the scheduler's issue
// rule), runs its real kernel and releases its dependents. Times are wall-clock from the first entry.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "exec/thread_pool.h"
#include "fuse/runtime.h"

namespace hanpu::fuse {

Status run_group_host(const std::vector<Task>& tasks, int group, int64_t capacity, GroupResult* out,
                      std::string* trace) {
  for (const Task& t : tasks) {
    if (t.host.size() != t.stages.size()) {
      return InvalidArgument("task '" + t.spec + "' was built without host data (build_task(..., host_data=true))");
    }
  }
  GroupPlan plan;
  HANPU_RETURN_IF_ERROR(plan_group(tasks, group, capacity, "L2", &plan));
  const int n = static_cast<int>(plan.stages.size());
  std::vector<int> pending(n);
  std::vector<std::vector<int>> dependents(n);
  std::map<Lane, std::set<int>> ready;
  for (int i = 0; i < n; ++i) {
    pending[i] = static_cast<int>(plan.stages[i].deps.size());
    for (int d : plan.stages[i].deps) dependents[d].push_back(i);
    if (pending[i] == 0) ready[plan.stages[i].lane].insert(i);
  }
  std::vector<double> start(n, 0), end(n, 0);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto now_ns = [&] { return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count(); };
  auto work = [&](Lane lane) {
    for (;;) {
      int id;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return !ready[lane].empty() || finished == n; });
        if (ready[lane].empty()) return;
        id = *ready[lane].begin();
        ready[lane].erase(ready[lane].begin());
      }
      const PlannedStage& s = plan.stages[id];
      start[id] = now_ns();
      if (s.task >= 0) tasks[s.task].host[s.stage]();
      end[id] = now_ns();
      {
        std::lock_guard<std::mutex> lk(mu);
        ++finished;
        for (int d : dependents[id]) {
          if (--pending[d] == 0) ready[plan.stages[d].lane].insert(d);
        }
      }
      cv.notify_all();
    }
  };
  const std::vector<int> cpus = allowed_cpus();
  std::vector<std::thread> workers;
  const std::pair<Lane, size_t> placement[] = {{Lane::kMatrix, 0}, {Lane::kVector, 1}, {Lane::kDma, 1}};
  for (const auto& [lane, slot] : placement) {
    workers.emplace_back(work, lane);
    if (!cpus.empty()) pin_thread(workers.back(), cpus[slot % cpus.size()]);
  }
  work(Lane::kControl);
  for (std::thread& t : workers) t.join();
  const std::map<Lane, std::string> lanes = {
      {Lane::kControl, "control"}, {Lane::kDma, "DMA"}, {Lane::kVector, "vector"}, {Lane::kMatrix, "matrix"}};
  sim::Counter regions;
  *out = summarise(plan, tasks, start, end, lanes, "L2", &regions);
  if (trace) *trace = plan_trace(plan, lanes, start, end, regions, "host group " + std::to_string(group));
  return Status::Ok();
}

}  // namespace hanpu::fuse
