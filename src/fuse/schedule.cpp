#include "fuse/schedule.h"

#include <algorithm>

#include "sim/lower.h"

namespace hanpu::fuse {

Lane lane_of(EngineClass e) {
  return e == EngineClass::kDma ? Lane::kDma : e == EngineClass::kVector ? Lane::kVector : Lane::kMatrix;
}

namespace {

// Stages no other stage of the task depends on: the task is complete when they are.
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

Status plan_group(const std::vector<Task>& tasks, int group, int64_t capacity, const std::string& memory,
                  GroupPlan* out) {
  if (group < 1 || group > 4) return InvalidArgument("group must be 1..4");
  int64_t together = 0;
  for (const Task& t : tasks) {
    if (t.on_chip_bytes > capacity) {
      return InvalidArgument("task '" + t.spec + "' needs " + std::to_string(t.on_chip_bytes) + " on-chip bytes; " +
                             memory + " holds " + std::to_string(capacity));
    }
    together += t.on_chip_bytes;
  }
  GroupPlan p;
  p.group = group;
  p.one_entry = group >= 3;
  if (p.one_entry && together > capacity) {
    return InvalidArgument("refused: the tasks' regions need " + std::to_string(together) + " bytes together, " +
                           memory + " holds " + std::to_string(capacity) + " (each in-flight task needs its own region)");
  }
  auto add = [&](PlannedStage s) {
    p.stages.push_back(std::move(s));
    return static_cast<int>(p.stages.size()) - 1;
  };
  std::vector<int> done_prev;  // the previous task's sinks
  int entry = -1;
  if (p.one_entry) p.entries.push_back(entry = add({-1, -1, Lane::kControl, {}, "entry"}));
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    if (!p.one_entry) {
      std::vector<int> deps;
      if (group == 1) deps = done_prev;
      else if (!p.entries.empty()) deps = {p.entries.back()};
      p.entries.push_back(entry = add({-1, -1, Lane::kControl, std::move(deps), "entry " + t.spec}));
    }
    const bool waits = (group == 2 || group == 3) && k > 0;
    std::vector<int> ids;
    for (size_t i = 0; i < t.stages.size(); ++i) {
      const Stage& s = t.stages[i];
      std::vector<int> deps = {entry};
      for (int dep : s.deps) deps.push_back(ids[dep]);
      if (waits && s.deps.empty()) deps.insert(deps.end(), done_prev.begin(), done_prev.end());
      ids.push_back(add({static_cast<int>(k), static_cast<int>(i), lane_of(s.engine), std::move(deps), t.spec + " " + s.name}));
    }
    done_prev.clear();
    for (int s : sinks(t)) done_prev.push_back(ids[s]);
    p.task_stages.push_back(std::move(ids));
    // In one entry the regions are laid out one after another; separate entries each start at 0.
    p.region_offset.push_back(p.one_entry && k > 0 ? p.region_offset.back() + tasks[k - 1].on_chip_bytes : 0);
  }
  *out = std::move(p);
  return Status::Ok();
}

GroupResult summarise(const GroupPlan& plan, const std::vector<Task>& tasks, const std::vector<double>& start_ns,
                      const std::vector<double>& end_ns, const std::map<Lane, std::string>& lane_name,
                      const std::string& memory, sim::Counter* regions) {
  GroupResult r;
  r.group = plan.group;
  r.stage_us.resize(tasks.size());
  for (size_t k = 0; k < tasks.size(); ++k) {
    for (int id : plan.task_stages[k]) r.stage_us[k].push_back((end_ns[id] - start_ns[id]) / 1e3);
  }
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const PlannedStage& s = plan.stages[i];
    r.makespan_us = std::max(r.makespan_us, end_ns[i] / 1e3);
    r.engine_busy_us[lane_name.at(s.lane)] += (end_ns[i] - start_ns[i]) / 1e3;
    r.lane_busy_us[s.lane] += (end_ns[i] - start_ns[i]) / 1e3;
    if (s.task >= 0) {
      const Stage& st = tasks[s.task].stages[s.stage];
      if (st.engine == EngineClass::kDma) r.gm_bytes += st.bytes;
    }
  }
  // Regions: in one entry every task's is reserved from the entry's end (its dispatch) to the task's
  // completion; in separate entries from the task's first stage to its last.
  std::vector<std::pair<double, int64_t>> occ;
  for (size_t k = 0; k < tasks.size(); ++k) {
    double first = 1e300, last = 0;
    for (int id : plan.task_stages[k]) {
      first = std::min(first, start_ns[id]);
      last = std::max(last, end_ns[id]);
    }
    if (plan.one_entry) first = end_ns[plan.entries[0]];
    r.completion_us.push_back(last / 1e3);
    occ.emplace_back(first, tasks[k].on_chip_bytes);
    occ.emplace_back(last, -tasks[k].on_chip_bytes);
  }
  *regions = sim::occupancy_counter(0, memory, std::move(occ), &r.peak_on_chip_bytes);
  return r;
}

std::string plan_trace(const GroupPlan& plan, const std::map<Lane, std::string>& lane_name,
                       const std::vector<double>& start_ns, const std::vector<double>& end_ns,
                       const sim::Counter& regions, const std::string& title) {
  sim::Program p;
  for (const PlannedStage& s : plan.stages) {
    sim::Task t;
    t.engine = lane_name.at(s.lane);
    t.deps = s.deps;
    t.label = s.label;
    p.add(std::move(t));
  }
  sim::Schedule s;
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  return sim::chrome_trace(p, s, title, {regions});
}

}  // namespace hanpu::fuse
