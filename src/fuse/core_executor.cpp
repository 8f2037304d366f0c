// The one-core host executor of the runtime (fuse/runtime.h, run_group_core): the four groups of the
// fusion notes on one core of this CPU, where a matrix engine beside the vector unit (AMX tiles next to
// AVX-512) plays the part of HMX next to HVX.
//
// A worker is a thread pinned to the core; an entry is a real dispatch: the controller hands a job to an
// idle worker, and the entry lasts from the hand-off to the job's first instruction.
//   group 1: one worker; entry(A), A's stages in order, then entry(B) once A is done, B's stages.
//   group 2: two workers on the same core (or, with `two_cores`, one per core), both entries handed over
//            at once: the OS time-slices the two instruction streams (or they run side by side).
//   group 3: one worker, one entry: A's stages, then B's (the barrier).
//   group 4: one worker, one entry: A's and B's stage slices interleaved in one instruction stream
//            (software pipelining, see interleave()).
// Every time is wall-clock from the first hand-off; a stage's time is the sum of its slices' runs (a run
// lasts from the previous run's end on its worker to its own, so busy times add up to the makespan).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "exec/thread_pool.h"
#include "fuse/runtime.h"
#include "kernels/kernel_set.h"
#include "sim/event_sim.h"

namespace hanpu::fuse {

namespace {

using Clock = std::chrono::steady_clock;

// A pinned thread that runs one job per hand-off.
class CoreWorker {
 public:
  explicit CoreWorker(int cpu) : thread_([this] { loop(); }) {
    if (cpu >= 0) pin_thread(thread_, cpu);
    post([] {});  // the pinning takes effect and the thread is parked before anything is timed
    wait();
  }
  ~CoreWorker() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  CoreWorker(const CoreWorker&) = delete;
  CoreWorker& operator=(const CoreWorker&) = delete;

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !busy_; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return job_ || quit_; });
        if (!job_) return;
        job = std::move(job_);
        job_ = nullptr;
      }
      job();
      {
        std::lock_guard<std::mutex> lk(mu_);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false, quit_ = false;
  std::thread thread_;
};

// Slice runs are stamped with the time-stamp counter where there is one: group 4 stamps thousands of runs,
// and the counter reads in a few ns where the steady clock takes ~26 ns (this VM's vDSO), which would be
// measured as the interleaving's own cost. Each run is stamped once, at its end: it starts where the
// previous run of its worker ended. Ticks become ns by the steady clock's reading over the whole group.
uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
#endif
}

// One run of slices [s0, s1) of a task's stage, in ticks.
struct SliceRun {
  int stage = 0;
  int64_t s0 = 0, s1 = 0;
  uint64_t start = 0, end = 0;
};

// A stage's cost in core cycles, from the task's resource vector: compute stages their cycles; a copy
// ("DMA" on the host is the core's own loads and stores) reads and writes each byte at the vector rate.
double stage_cost(const Stage& s, const plan::Device& d) {
  return s.engine == EngineClass::kDma ? 2 * s.bytes / d.vector_bytes_per_cycle : s.cycles;
}

// Runs one task's stages on the calling worker, recording every slice run; `last` is the worker's last
// stamp (the job's start, then each run's end).
class TaskRunner {
 public:
  TaskRunner(const Task& t, uint64_t* last, std::vector<SliceRun>* runs) : t_(t), last_(last), runs_(runs) {}
  // Runs the next `n` slices of the current stage (moving on to the next stage at its end).
  void run(int64_t n) {
    const HostStage& h = t_.host[stage_];
    const int64_t s1 = std::min(h.slices, slice_ + n);
    h.run(slice_, s1);
    const uint64_t end = ticks();
    runs_->push_back({stage_, slice_, s1, *last_, end});
    *last_ = end;
    slice_ = s1;
    if (slice_ == h.slices) {
      ++stage_;
      slice_ = 0;
    }
  }
  void run_all() {
    while (!done()) run(t_.host[stage_].slices);
  }
  bool done() const { return stage_ == static_cast<int>(t_.host.size()); }
  int stage() const { return stage_; }
  int64_t slices_left() const { return t_.host[stage_].slices - slice_; }

 private:
  const Task& t_;
  uint64_t* last_;
  std::vector<SliceRun>* runs_;
  int stage_ = 0;
  int64_t slice_ = 0;
};

// Group 4's instruction stream. The lead task (the one with more matrix work) runs its slices in order;
// after each matrix slice the filler task earns a credit of
//   W_filler * m / M_lead      (m: the slice's matrix cycles, M_lead: the lead's total matrix cycles)
// and runs slices while the credit lasts, so its work is spread over the lead's tile steps in proportion
// to them and both end together: the slice size is the ratio of the two resource vectors. With no matrix
// work in either task, every lead slice earns credit in proportion to its own cost.
void interleave(const std::vector<Task>& tasks, const plan::Device& d, TaskRunner* runner[2]) {
  const int lead = tasks[1].matrix_cycles > tasks[0].matrix_cycles ? 1 : 0, filler = 1 - lead;
  const Task& L = tasks[lead];
  const Task& F = tasks[filler];
  auto slice_cost = [&](const Task& t, int i) { return stage_cost(t.stages[i], d) / static_cast<double>(t.host[i].slices); };
  double filler_total = 0, lead_total = 0;
  for (size_t i = 0; i < F.stages.size(); ++i) filler_total += stage_cost(F.stages[i], d);
  for (size_t i = 0; i < L.stages.size(); ++i) lead_total += stage_cost(L.stages[i], d);
  const bool by_matrix = L.matrix_cycles > 0;
  const double basis = by_matrix ? L.matrix_cycles : lead_total;
  TaskRunner& lr = *runner[lead];
  TaskRunner& fr = *runner[filler];
  double credit = 0;
  while (!lr.done()) {
    const int i = lr.stage();
    const bool earns = !by_matrix || L.stages[i].engine == EngineClass::kMatrix;
    if (!earns) {  // a lead stage that earns nothing runs whole
      lr.run(lr.slices_left());
      continue;
    }
    const double c = slice_cost(L, i);
    lr.run(1);
    if (basis > 0) credit += filler_total * c / basis;
    while (credit > 0 && !fr.done()) {
      const double fc = slice_cost(F, fr.stage());
      // As many of the current filler stage's slices as the credit covers (at least one).
      const int64_t n = fc > 0 ? std::max<int64_t>(1, static_cast<int64_t>(credit / fc)) : fr.slices_left();
      const int64_t take = std::min(n, fr.slices_left());
      fr.run(take);
      credit -= fc * static_cast<double>(take);
    }
  }
  fr.run_all();
}

}  // namespace

bool host_matrix_engine() { return active_kernels().bf16_matrix_engine; }

Status predict_core(const std::vector<Task>& tasks, const std::vector<GroupResult>& alone, const plan::Device& host,
                    bool matrix_engine, GroupResult out[4]) {
  if (tasks.size() != 2 || alone.size() != 2) return InvalidArgument("predict_core takes two tasks and their alone runs");
  // Work (DMA bytes, vector cycles, matrix cycles of the host description) and measured time per class.
  double work[3] = {}, busy_ns[3] = {}, entry_us = 0;
  auto cls = [](const Stage& s) { return static_cast<int>(s.engine); };
  for (int k = 0; k < 2; ++k) {
    const Task& t = tasks[k];
    if (alone[k].stage_us.size() != 1 || alone[k].stage_us[0].size() != t.stages.size()) {
      return InvalidArgument("the alone run of '" + t.spec + "' does not match its stages");
    }
    for (size_t i = 0; i < t.stages.size(); ++i) {
      const Stage& s = t.stages[i];
      work[cls(s)] += s.engine == EngineClass::kDma ? s.bytes : s.cycles;
      busy_ns[cls(s)] += 1e3 * alone[k].stage_us[0][i];
    }
    const auto c = alone[k].lane_busy_us.find(Lane::kControl);
    entry_us += c == alone[k].lane_busy_us.end() ? 0 : c->second / 2;
  }
  // Per class: model work units per ns (bytes per ns for copies), so that a stage costs its measured share.
  double rate[3];
  for (int c = 0; c < 3; ++c) rate[c] = work[c] > 0 && busy_ns[c] > 0 ? work[c] / busy_ns[c] : 1;
  plan::Device m = host;
  m.name = host.name + " one-core model";
  m.clock_ghz = 1;  // cycles are ns
  m.has_sim = true;
  m.sim = plan::SimParams();
  m.sim.global_read_bytes_per_cycle = m.sim.global_write_bytes_per_cycle = rate[static_cast<int>(EngineClass::kDma)];
  m.sim.launch_overhead_us = entry_us;
  const std::string core = "core";
  m.sim.queues = {core, core, core, matrix_engine ? "matrix" : core, core, core, "control"};
  std::vector<Task> model = tasks;
  for (Task& t : model) {
    t.host.clear();
    t.host_output.reset();
    for (Stage& s : t.stages) {
      if (s.engine != EngineClass::kDma) s.cycles /= rate[cls(s)];
    }
  }
  for (int g = 1; g <= 4; ++g) HANPU_RETURN_IF_ERROR(run_group(model, m, g, &out[g - 1]));
  return Status::Ok();
}

Status run_group_core(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                      std::string* trace, bool two_cores) {
  for (const Task& t : tasks) {
    if (t.host.size() != t.stages.size()) {
      return InvalidArgument("task '" + t.spec + "' was built without host data (build_task(..., host_data=true))");
    }
  }
  if (group == 4 && tasks.size() != 2) {
    return InvalidArgument("group 4 on one core interleaves two tasks, got " + std::to_string(tasks.size()));
  }
  if (d.vector_bytes_per_cycle <= 0) return InvalidArgument("device '" + d.name + "' has no vector rate");
  GroupPlan plan;
  HANPU_RETURN_IF_ERROR(plan_group(tasks, group, on_chip_capacity(d), "L2", &plan));
  const std::vector<int> cpus = allowed_cpus();
  if (two_cores && cpus.size() < 2) {
    return InvalidArgument("group 2 on two cores needs two CPUs this process may use, it has " +
                           std::to_string(cpus.size()));
  }
  const int cpu = cpus.empty() ? -1 : cpus[0];
  const int other = two_cores ? cpus[1] : cpu;
  const size_t n_workers = group == 2 ? tasks.size() : 1;
  std::vector<std::unique_ptr<CoreWorker>> workers;
  for (size_t w = 0; w < n_workers; ++w) {
    workers.push_back(std::make_unique<CoreWorker>(two_cores && w % 2 == 1 ? other : cpu));
  }
  const size_t n = plan.stages.size();
  std::vector<double> start(n, 0), end(n, 0);
  std::vector<std::vector<SliceRun>> runs(tasks.size());
  std::vector<uint64_t> last(tasks.size(), 0);  // each job's last stamp (jobs 1.. only in groups 1 and 2)
  const Clock::time_point t0 = Clock::now();
  const uint64_t k0 = ticks();
  auto now = [&] { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); };
  // An entry's job: its end is the job's first instruction.
  auto entry_job = [&](int entry, std::function<void()> body) {
    start[plan.entries[entry]] = now();
    return [&, entry, body = std::move(body)] {
      end[plan.entries[entry]] = now();
      last[entry] = ticks();
      body();
    };
  };
  auto whole = [&](size_t k, size_t job) {
    return [&, k, job] { TaskRunner(tasks[k], &last[job], &runs[k]).run_all(); };
  };
  if (group == 1) {
    for (size_t k = 0; k < tasks.size(); ++k) {
      workers[0]->post(entry_job(static_cast<int>(k), whole(k, k)));
      workers[0]->wait();
    }
  } else if (group == 2) {
    for (size_t k = 0; k < tasks.size(); ++k) workers[k]->post(entry_job(static_cast<int>(k), whole(k, k)));
    for (auto& w : workers) w->wait();
  } else if (group == 3) {
    workers[0]->post(entry_job(0, [&] {
      for (size_t k = 0; k < tasks.size(); ++k) whole(k, 0)();
    }));
    workers[0]->wait();
  } else {
    workers[0]->post(entry_job(0, [&] {
      TaskRunner a(tasks[0], &last[0], &runs[0]), b(tasks[1], &last[0], &runs[1]);
      TaskRunner* r[2] = {&a, &b};
      interleave(tasks, d, r);
    }));
    workers[0]->wait();
  }
  // Ticks to ns from the first hand-off, by the steady clock over the whole group.
  const double ns_per_tick = now() / static_cast<double>(std::max<uint64_t>(1, ticks() - k0));
  auto ns = [&](uint64_t k) { return static_cast<double>(k - k0) * ns_per_tick; };
  // Planned stages' spans (first slice to last) for completion and regions; busy and stage times are
  // the sums of the slice runs (in group 4 a stage's span also holds the other task's slices).
  std::vector<std::vector<double>> stage_sum(tasks.size());
  std::map<Lane, double> busy;
  for (size_t k = 0; k < tasks.size(); ++k) {
    stage_sum[k].assign(tasks[k].stages.size(), 0);
    std::vector<char> seen(tasks[k].stages.size(), 0);
    for (const SliceRun& r : runs[k]) {
      const int id = plan.task_stages[k][r.stage];
      if (!seen[r.stage]) start[id] = ns(r.start);
      seen[r.stage] = 1;
      end[id] = ns(r.end);
      const double us = (ns(r.end) - ns(r.start)) / 1e3;
      stage_sum[k][r.stage] += us;
      busy[lane_of(tasks[k].stages[r.stage].engine)] += us;
    }
  }
  for (int e : plan.entries) busy[Lane::kControl] += (end[e] - start[e]) / 1e3;
  const std::map<Lane, std::string> lanes = {
      {Lane::kControl, "control"}, {Lane::kDma, "DMA"}, {Lane::kVector, "vector"}, {Lane::kMatrix, "matrix"}};
  sim::Counter regions;
  GroupResult r = summarise(plan, tasks, start, end, lanes, "L2", &regions);
  r.stage_us = stage_sum;
  r.lane_busy_us = busy;
  r.engine_busy_us.clear();
  for (const auto& [lane, us] : busy) r.engine_busy_us[lanes.at(lane)] = us;
  if (trace) {
    // One lane per task (and the entries'), one event per slice run: group 4's interleaving shows as
    // the two lanes alternating.
    sim::Program p;
    sim::Schedule s;
    auto add = [&](const std::string& lane, const std::string& label, double t_start, double t_end) {
      sim::Task t;
      t.engine = lane;
      t.label = label;
      p.add(std::move(t));
      s.start_ns.push_back(t_start);
      s.end_ns.push_back(t_end);
    };
    for (int e : plan.entries) add("control", plan.stages[e].label, start[e], end[e]);
    for (size_t k = 0; k < tasks.size(); ++k) {
      const std::string lane = std::string(1, static_cast<char>('A' + k)) + ": " + tasks[k].spec;
      for (const SliceRun& sr : runs[k]) {
        const HostStage& h = tasks[k].host[sr.stage];
        std::string label = tasks[k].stages[sr.stage].name;
        if (h.slices > 1) label += " [" + std::to_string(sr.s0) + "," + std::to_string(sr.s1) + ")/" + std::to_string(h.slices);
        add(lane, label, ns(sr.start), ns(sr.end));
      }
    }
    *trace = sim::chrome_trace(p, s, "host core group " + std::to_string(group) + (two_cores ? " (two cores)" : ""),
                               {regions});
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace hanpu::fuse
