#include "fuse/runtime.h"

#include <algorithm>

#include "exec/thread_pool.h"
#include "kernels/kernel_set.h"
#include "sim/event_sim.h"
#include "sim/lower.h"

namespace hanpu::fuse {

namespace {

std::map<Lane, std::string> model_lanes(const sim::Engines& e) {
  return {{Lane::kControl, e.control}, {Lane::kDma, "DMA"}, {Lane::kVector, e.vector}, {Lane::kMatrix, e.matrix}};
}

}  // namespace

Status run_group(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                 std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  GroupPlan plan;
  HANPU_RETURN_IF_ERROR(plan_group(tasks, group, on_chip_capacity(d), d.vector_mem, &plan));
  const sim::Engines e = sim::engines_of(d);
  sim::Program p;
  for (const PlannedStage& ps : plan.stages) {
    sim::Task t;
    t.deps = ps.deps;
    t.label = ps.label;
    if (ps.task < 0) {
      t.engine = e.control;
      t.cycles = d.sim.launch_overhead_us * 1e3 * d.clock_ghz;
    } else {
      const Stage& s = tasks[ps.task].stages[ps.stage];
      if (s.engine == EngineClass::kDma) {
        t.engine = s.store ? e.store : e.load;
        t.cycles = d.sim.transfer_setup_cycles;
        t.bytes = s.bytes;
        t.path_bytes_per_cycle = s.store ? d.sim.global_write_bytes_per_cycle : d.sim.global_read_bytes_per_cycle;
        t.global = true;
      } else {
        t.engine = s.engine == EngineClass::kVector ? e.vector : e.matrix;
        t.cycles = s.cycles;
      }
    }
    p.add(std::move(t));
  }
  sim::Machine m;
  m.clock_ghz = d.clock_ghz;
  m.global_bytes_per_ns = d.sim.global_gbps;
  m.issue_ready_first = true;  // the scheduler's issue rule
  sim::Schedule s;
  HANPU_RETURN_IF_ERROR(sim::simulate(p, m, &s));
  std::map<Lane, std::string> lanes = model_lanes(e);
  sim::Counter regions;
  GroupResult r = summarise(plan, tasks, s.start_ns, s.end_ns, lanes, d.vector_mem, &regions);
  // Bandwidth contention: DMA time beyond each transfer's set-up plus bytes at its own path rate.
  r.dma_stall_us = 0;
  for (int i = 0; i < static_cast<int>(p.tasks().size()); ++i) {
    const sim::Task& t = p.tasks()[i];
    if (t.bytes <= 0) continue;
    const double alone_ns = (t.cycles + t.bytes / t.path_bytes_per_cycle) / d.clock_ghz;
    r.dma_stall_us += std::max(0.0, s.end_ns[i] - s.start_ns[i] - alone_ns) / 1e3;
  }
  // The trace keeps the model's own queues (Ascend's MTE2 and MTE3 apart).
  if (trace) *trace = sim::chrome_trace(p, s, d.name + " group " + std::to_string(group), {regions});
  *out = std::move(r);
  return Status::Ok();
}

Status run_pair(const std::string& a, const std::string& b, const plan::Device& d, Executor ex, PairReport* out,
                std::string* trace, int reps) {
  if (ex == Executor::kModel && !d.has_sim) {
    return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  }
  PairReport rep;
  rep.executor = ex == Executor::kModel ? "model" : ex == Executor::kHost ? "host" : "host-core";
  rep.device = d.name;
  const int64_t capacity = on_chip_capacity(d);
  for (const std::string& spec : {a, b}) {
    Task t;
    HANPU_RETURN_IF_ERROR(build_task(spec, d, capacity / 2, &t, ex != Executor::kModel));
    rep.tasks.push_back(std::move(t));
  }
  // The runs of one repetition: each task alone (for D, V, M) and the four groups (host-core: and group 2
  // on two cores). The model runs once; the host interleaves `reps` repetitions (so drift hits every
  // group alike) and keeps, per run, the repetition with the median makespan.
  const int n_reps = ex == Executor::kModel ? 1 : std::max(1, reps);
  // alone A, alone B, groups 1..4[, group 2 on two cores, where this process may use two CPUs]
  const bool two_cores = ex == Executor::kHostCore && allowed_cpus().size() >= 2;
  const int kRuns = two_cores ? 7 : 6;
  const int kGroup4 = 5, kTwoCores = 6;  // the runs of group 4 and of group 2 on two cores
  const std::vector<Task> alone[2] = {{rep.tasks[0]}, {rep.tasks[1]}};
  std::vector<std::vector<std::pair<GroupResult, std::string>>> runs(kRuns);  // (result, trace)
  for (int r = 0; r < n_reps; ++r) {
    for (int k = 0; k < kRuns; ++k) {
      const std::vector<Task>& ts = k < 2 ? alone[k] : rep.tasks;
      const int g = k < 2 ? 1 : k == kTwoCores ? 2 : k - 1;
      std::pair<GroupResult, std::string> run;
      std::string* tr = trace && k == kGroup4 ? &run.second : nullptr;  // group 4's trace
      HANPU_RETURN_IF_ERROR(ex == Executor::kModel  ? run_group(ts, d, g, &run.first, tr)
                            : ex == Executor::kHost ? run_group_host(ts, g, capacity, &run.first, tr)
                                                    : run_group_core(ts, d, g, &run.first, tr, k == kTwoCores));
      runs[k].push_back(std::move(run));
    }
  }
  std::vector<std::pair<GroupResult, std::string>> median(kRuns);
  for (int k = 0; k < kRuns; ++k) {
    std::sort(runs[k].begin(), runs[k].end(),
              [](const auto& x, const auto& y) { return x.first.makespan_us < y.first.makespan_us; });
    median[k] = runs[k][runs[k].size() / 2];
  }
  // The engine times of each task alone (its own entry), summed: D, V, M of the ideal bound.
  for (int k = 0; k < 2; ++k) {
    std::map<Lane, double>& busy = median[k].first.lane_busy_us;
    rep.dma_us += busy[Lane::kDma];
    rep.vector_us += busy[Lane::kVector];
    rep.matrix_us += busy[Lane::kMatrix];
  }
  const double total = rep.dma_us + rep.vector_us + rep.matrix_us;
  if (ex == Executor::kHostCore) {
    rep.matrix_engine = host_matrix_engine();
    rep.matrix_lane = active_kernels().bf16_unit;
    const double mx = std::max(rep.dma_us + rep.vector_us, rep.matrix_us);
    rep.ideal = rep.matrix_engine && mx > 0 ? total / mx : 1;
  } else {
    const double mx = std::max({rep.dma_us, rep.vector_us, rep.matrix_us});
    rep.ideal = mx > 0 ? total / mx : 1;
  }
  for (int g = 1; g <= 4; ++g) rep.groups[g - 1] = median[g + 1].first;
  if (ex == Executor::kHostCore) {
    rep.has_two_cores = two_cores;
    if (two_cores) rep.group2_two_cores = median[kTwoCores].first;
    const std::vector<GroupResult> alone_runs = {median[0].first, median[1].first};
    HANPU_RETURN_IF_ERROR(predict_core(rep.tasks, alone_runs, d, rep.matrix_engine, rep.model));
    if (!rep.matrix_engine) {
      rep.has_engine_model = true;
      HANPU_RETURN_IF_ERROR(predict_core(rep.tasks, alone_runs, d, true, rep.engine_model));
    }
  }
  if (ex != Executor::kModel) {
    // Host contention: the DMA stages' time in the group beyond the same stages' time alone (summed with
    // signs, so per-stage noise cancels; clamped at 0).
    std::vector<GroupResult*> groups = {&rep.groups[0], &rep.groups[1], &rep.groups[2], &rep.groups[3]};
    if (rep.has_two_cores) groups.push_back(&rep.group2_two_cores);
    for (GroupResult* gp : groups) {
      GroupResult& g = *gp;
      double extra = 0;
      for (int k = 0; k < 2; ++k) {
        const std::vector<Stage>& st = rep.tasks[k].stages;
        for (size_t i = 0; i < st.size(); ++i) {
          if (st[i].engine == EngineClass::kDma) extra += g.stage_us[k][i] - median[k].first.stage_us[0][i];
        }
      }
      g.dma_stall_us = std::max(0.0, extra);
    }
  }
  if (trace) *trace = median[kGroup4].second;
  rep.e_effect = rep.groups[0].makespan_us / rep.groups[2].makespan_us;
  rep.a_effect = rep.groups[2].makespan_us / rep.groups[3].makespan_us;
  rep.gain_over_2 = rep.groups[1].makespan_us / rep.groups[3].makespan_us;
  if (rep.has_two_cores) rep.gain_over_2_two_cores = rep.group2_two_cores.makespan_us / rep.groups[3].makespan_us;
  *out = std::move(rep);
  return Status::Ok();
}

}  // namespace hanpu::fuse
