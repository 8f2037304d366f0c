#include "sim/event_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

namespace hanpu::sim {

int Program::add(Task t) {
  tasks_.push_back(std::move(t));
  return static_cast<int>(tasks_.size()) - 1;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A task in flight: its set-up phase ends at setup_end; a transfer then has `left` bytes to move.
struct Active {
  int id;
  double setup_end;
  double left;
  bool flowing;  // past set-up, moving bytes
};

}  // namespace

Status simulate(const Program& prog, const Machine& m, Schedule* out) {
  const std::vector<Task>& ts = prog.tasks();
  const int n = static_cast<int>(ts.size());
  if (!(m.clock_ghz > 0)) return InvalidArgument("machine clock must be positive");
  for (int i = 0; i < n; ++i) {
    const Task& t = ts[i];
    const std::string who = "task " + std::to_string(i) + " (" + t.label + ")";
    if (t.cycles < 0 || t.bytes < 0) return InvalidArgument(who + ": negative cycles or bytes");
    if (t.bytes > 0 && !(t.path_bytes_per_cycle > 0)) return InvalidArgument(who + ": a transfer needs a path rate");
    if (t.engine.empty()) return InvalidArgument(who + ": no engine");
    for (int d : t.deps) {
      if (d < 0 || d >= i) return InvalidArgument(who + ": depends on task " + std::to_string(d) + ", not an earlier one");
    }
  }
  Schedule s;
  s.start_ns.assign(n, -1);
  s.end_ns.assign(n, -1);
  // One queue per (core, engine), numbered in key order (the order queues are served: deterministic);
  // each holds its tasks in id order. The event loop works on the numbers only.
  std::map<std::pair<int, std::string>, int> queue_of;
  for (const Task& t : ts) queue_of.emplace(std::make_pair(t.core, t.engine), 0);
  std::vector<std::pair<int, std::string>> keys;
  for (auto& [key, q] : queue_of) {
    q = static_cast<int>(keys.size());
    keys.push_back(key);
  }
  std::vector<int> qid(n);
  std::vector<std::deque<int>> queues(keys.size());
  for (int i = 0; i < n; ++i) queues[qid[i] = queue_of.at({ts[i].core, ts[i].engine})].push_back(i);
  std::vector<char> busy(keys.size(), 0);
  std::vector<double> busy_ns(keys.size(), 0.0);
  std::vector<int> pending_deps(n);
  std::vector<std::vector<int>> dependents(n);
  for (int i = 0; i < n; ++i) {
    pending_deps[i] = static_cast<int>(ts[i].deps.size());
    for (int d : ts[i].deps) dependents[d].push_back(i);
  }
  std::vector<Active> active;
  double now = 0;
  int finished = 0;
  const double ns_per_cycle = 1.0 / m.clock_ghz;
  // Rate (bytes/ns) of each flowing transfer under the current sharing.
  auto rate_of = [&](const Active& a, int flowing_global) {
    const Task& t = ts[a.id];
    double r = t.path_bytes_per_cycle * m.clock_ghz;
    if (t.global && m.global_bytes_per_ns > 0 && flowing_global > 0) {
      r = std::min(r, m.global_bytes_per_ns / flowing_global);
    }
    return r;
  };
  auto start_ready = [&] {
    // Start every queue head whose dependencies are done, in (core, engine) order: deterministic.
    for (size_t k = 0; k < queues.size(); ++k) {
      std::deque<int>& q = queues[k];
      if (busy[k] || q.empty()) continue;
      auto it = q.begin();
      if (m.issue_ready_first) {
        while (it != q.end() && pending_deps[*it] > 0) ++it;
      }
      if (it == q.end() || pending_deps[*it] > 0) continue;
      const int id = *it;
      q.erase(it);
      busy[k] = 1;
      s.start_ns[id] = now;
      const Task& t = ts[id];
      active.push_back({id, now + t.cycles * ns_per_cycle, t.bytes, false});
    }
  };
  start_ready();
  while (finished < n) {
    if (active.empty()) return InvalidArgument("the program deadlocks: a queue waits on a task queued behind it");
    int flowing_global = 0;
    for (const Active& a : active) flowing_global += a.flowing && ts[a.id].global ? 1 : 0;
    // The next event: a set-up ends, a transfer or a compute task ends.
    double next = kInf;
    for (const Active& a : active) {
      if (!a.flowing) {
        next = std::min(next, a.setup_end);
      } else {
        next = std::min(next, now + a.left / rate_of(a, flowing_global));
      }
    }
    // Advance the flowing transfers to `next` at their current rates. The transfer(s) that define `next`
    // end exactly there (at large times `now + dt - now` may round to 0 and never finish them otherwise).
    for (Active& a : active) {
      if (!a.flowing) continue;
      const double r = rate_of(a, flowing_global);
      a.left = now + a.left / r <= next ? 0.0 : std::max(0.0, a.left - r * (next - now));
    }
    now = next;
    // Completions and phase changes at `now`, in task id order.
    std::sort(active.begin(), active.end(), [](const Active& x, const Active& y) { return x.id < y.id; });
    std::vector<Active> still;
    for (Active& a : active) {
      if (!a.flowing && a.setup_end <= now) a.flowing = true;  // set-up done: bytes start moving (if any)
      const bool done = a.flowing && a.left <= 1e-9 * std::max(1.0, ts[a.id].bytes);
      if (!done) {
        still.push_back(a);
        continue;
      }
      const Task& t = ts[a.id];
      s.end_ns[a.id] = now;
      busy_ns[qid[a.id]] += now - s.start_ns[a.id];
      if (t.global) s.global_bytes += t.bytes;
      busy[qid[a.id]] = 0;
      ++finished;
      for (int d : dependents[a.id]) --pending_deps[d];
    }
    active = std::move(still);
    start_ready();
  }
  s.makespan_ns = n ? *std::max_element(s.end_ns.begin(), s.end_ns.end()) : 0;
  for (size_t k = 0; k < keys.size(); ++k) s.busy_ns[keys[k]] = busy_ns[k];
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace hanpu::sim
