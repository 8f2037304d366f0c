#include "fuse/runtime.h"

#include <algorithm>

#include "sim/event_sim.h"
#include "sim/lower.h"

namespace hanpu::fuse {

namespace {

// The sim task of one stage on core 0.
sim::Task stage_task(const Stage& s, const plan::Device& d, const sim::Engines& e, std::vector<int> deps,
                     const std::string& who) {
  sim::Task t;
  t.deps = std::move(deps);
  t.label = who + " " + s.name;
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
  return t;
}

// Stages no other stage of the task depends on (its completion), and stages without dependencies.
std::vector<int> sinks(const Task& t) {
  std::vector<char> used(t.stages.size(), 0);
  for (const Stage& s : t.stages) {
    for (int dep : s.deps) used[dep] = 1;
  }
  std::vector<int> ids;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

}  // namespace

Status run_group(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                 std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  if (group < 1 || group > 4) return InvalidArgument("group must be 1..4");
  const int64_t capacity = on_chip_capacity(d);
  int64_t together = 0;
  for (const Task& t : tasks) {
    if (t.on_chip_bytes > capacity) {
      return InvalidArgument("task '" + t.spec + "' needs " + std::to_string(t.on_chip_bytes) + " on-chip bytes; " +
                             d.vector_mem + " holds " + std::to_string(capacity));
    }
    together += t.on_chip_bytes;
  }
  const bool fused = group >= 3;
  if (fused && together > capacity) {
    return InvalidArgument("refused: the tasks' regions need " + std::to_string(together) + " bytes together, " +
                           d.vector_mem + " holds " + std::to_string(capacity) +
                           " (each in-flight task needs its own region)");
  }
  const sim::Engines e = sim::engines_of(d);
  const double launch_cycles = d.sim.launch_overhead_us * 1e3 * d.clock_ghz;
  sim::Program p;
  auto launch = [&](std::vector<int> deps, const std::string& label) {
    sim::Task t;
    t.engine = e.control;
    t.cycles = launch_cycles;
    t.deps = std::move(deps);
    t.label = label;
    return p.add(std::move(t));
  };
  std::vector<std::vector<int>> ids(tasks.size());
  std::vector<int> done_prev;  // the previous task's sink stages (program ids)
  int entry = fused ? launch({}, "entry") : -1;
  int prev_launch = -1;
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    if (!fused) {
      // 1: the next entry is issued once the previous has completed; 2: all submitted at once, the
      // launches queue on the control lane, the core runs one entry at a time.
      entry = group == 1 ? launch(done_prev, "entry " + t.spec)
                         : launch(prev_launch >= 0 ? std::vector<int>{prev_launch} : std::vector<int>{}, "entry " + t.spec);
      prev_launch = entry;
    }
    const bool waits = (group == 2 || group == 3) && k > 0;
    for (size_t i = 0; i < t.stages.size(); ++i) {
      std::vector<int> deps = {entry};
      for (int dep : t.stages[i].deps) deps.push_back(ids[k][dep]);
      if (waits && t.stages[i].deps.empty()) deps.insert(deps.end(), done_prev.begin(), done_prev.end());
      ids[k].push_back(p.add(stage_task(t.stages[i], d, e, std::move(deps), t.spec)));
    }
    done_prev.clear();
    for (int s : sinks(t)) done_prev.push_back(ids[k][s]);
  }
  sim::Machine m;
  m.clock_ghz = d.clock_ghz;
  m.global_bytes_per_ns = d.sim.global_gbps;
  m.issue_ready_first = true;
  sim::Schedule s;
  HANPU_RETURN_IF_ERROR(sim::simulate(p, m, &s));
  GroupResult r;
  r.group = group;
  r.makespan_us = s.makespan_ns / 1e3;
  r.gm_bytes = s.global_bytes;
  for (const auto& [key, ns] : s.busy_ns) r.engine_busy_us[key.second] += ns / 1e3;
  for (int i = 0; i < static_cast<int>(p.tasks().size()); ++i) {
    const sim::Task& t = p.tasks()[i];
    if (t.bytes <= 0) continue;
    const double alone_ns = (t.cycles + t.bytes / t.path_bytes_per_cycle) / d.clock_ghz;
    r.dma_stall_us += std::max(0.0, s.end_ns[i] - s.start_ns[i] - alone_ns) / 1e3;
  }
  // Regions: in one entry (3, 4) every task's is reserved from the entry's start to the task's
  // completion; in separate entries from the task's first stage to its last.
  std::vector<std::pair<double, int64_t>> occ;
  std::vector<sim::Counter> counters(1);
  counters[0].memory = d.vector_mem;
  for (size_t k = 0; k < tasks.size(); ++k) {
    double first = 1e300, last = 0;
    for (int id : ids[k]) {
      first = std::min(first, s.start_ns[id]);
      last = std::max(last, s.end_ns[id]);
    }
    r.completion_us.push_back(last / 1e3);
    if (fused) first = s.end_ns[entry];
    occ.emplace_back(first, tasks[k].on_chip_bytes);
    occ.emplace_back(last, -tasks[k].on_chip_bytes);
  }
  std::sort(occ.begin(), occ.end());
  int64_t level = 0;
  for (const auto& [ns, b] : occ) {
    level += b;
    r.peak_on_chip_bytes = std::max(r.peak_on_chip_bytes, level);
    counters[0].points.emplace_back(ns, level);
  }
  if (trace) *trace = sim::chrome_trace(p, s, d.name + " group " + std::to_string(group), counters);
  *out = std::move(r);
  return Status::Ok();
}

Status run_pair(const std::string& a, const std::string& b, const plan::Device& d, PairReport* out,
                std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  PairReport rep;
  const int64_t region = on_chip_capacity(d) / 2;
  for (const std::string& spec : {a, b}) {
    Task t;
    HANPU_RETURN_IF_ERROR(build_task(spec, d, region, &t));
    rep.tasks.push_back(std::move(t));
  }
  // The engine times of each task alone (its own entry), summed: D, V, M of the ideal bound.
  const sim::Engines e = sim::engines_of(d);
  for (const Task& t : rep.tasks) {
    GroupResult alone;
    HANPU_RETURN_IF_ERROR(run_group({t}, d, 1, &alone));
    for (const auto& [engine, us] : alone.engine_busy_us) {
      if (engine == e.load || engine == e.store) rep.dma_us += us;
      else if (engine == e.vector) rep.vector_us += us;
      else if (engine == e.matrix) rep.matrix_us += us;
    }
  }
  const double mx = std::max({rep.dma_us, rep.vector_us, rep.matrix_us});
  rep.ideal = mx > 0 ? (rep.dma_us + rep.vector_us + rep.matrix_us) / mx : 1;
  for (int g = 1; g <= 4; ++g) {
    HANPU_RETURN_IF_ERROR(run_group(rep.tasks, d, g, &rep.groups[g - 1], g == 4 ? trace : nullptr));
  }
  rep.e_effect = rep.groups[0].makespan_us / rep.groups[2].makespan_us;
  rep.a_effect = rep.groups[2].makespan_us / rep.groups[3].makespan_us;
  rep.gain_over_2 = rep.groups[1].makespan_us / rep.groups[3].makespan_us;
  *out = std::move(rep);
  return Status::Ok();
}

}  // namespace hanpu::fuse
