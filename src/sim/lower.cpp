#include "sim/lower.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/spill.h"

namespace hanpu::sim {

Engines engines_of(const plan::Device& d) { return d.sim.queues; }

namespace {

// A tensor's presence in a buffer of one core between two tasks (alloc at the first's start, free at the
// second's end).
struct Occupancy {
  int core;
  int memory;  // index into Emitter::memories
  int64_t bytes;
  int first_task, last_task;
};

// The program of one run, shared by the chunk lowerings that emit into it, and its counters.
class Emitter {
 public:
  explicit Emitter(const plan::Device& d) : d_(d), e_(engines_of(d)) {
    for (const plan::Memory& m : d.memories) {
      if (m.on_chip) memories.push_back(m.name);
    }
  }

  static Task task(int core, const std::string& engine, double cycles, std::vector<int> deps, std::string label) {
    Task t;
    t.core = core;
    t.engine = engine;
    t.cycles = cycles;
    t.deps = std::move(deps);
    t.label = std::move(label);
    return t;
  }

  const plan::Device& device() const { return d_; }
  const Engines& engines() const { return e_; }
  int next_id() const { return static_cast<int>(prog.tasks().size()); }

  int compute(int core, const std::string& engine, double cycles, std::vector<int> deps, std::string label) {
    return prog.add(task(core, engine, cycles, std::move(deps), std::move(label)));
  }

  // A transfer: `setup` cycles, then `b` bytes at `rate` bytes/cycle (or the global share).
  int transfer(int core, const std::string& engine, double b, double rate, bool global, double setup,
               std::vector<int> deps, std::string label) {
    Task t = task(core, engine, setup, std::move(deps), std::move(label));
    t.bytes = b;
    t.path_bytes_per_cycle = rate;
    t.global = global;
    return prog.add(std::move(t));
  }

  int load(int core, double b, std::vector<int> deps, std::string label) {
    return transfer(core, e_.load, b, d_.sim.global_read_bytes_per_cycle, true, d_.sim.transfer_setup_cycles,
                    std::move(deps), "load " + label);
  }
  int store(int core, double b, std::vector<int> deps, std::string label) {
    return transfer(core, e_.store, b, d_.sim.global_write_bytes_per_cycle, true, d_.sim.transfer_setup_cycles,
                    std::move(deps), "store " + label);
  }

  // A synchronisation point on every core: waits for `after`, then costs `us` (a launch or a barrier).
  std::vector<int> sync(int cores, const std::vector<int>& after, double us, const std::string& label) {
    std::vector<int> ids;
    for (int c = 0; c < cores; ++c) ids.push_back(compute(c, e_.control, us * 1e3 * d_.clock_ghz, after, label));
    return ids;
  }
  std::vector<int> launch(int cores, const std::vector<int>& after) {
    ++launches;
    return sync(cores, after, d_.sim.launch_overhead_us, "launch");
  }

  // Tail task ids of every queue so far (what a following launch waits for).
  std::vector<int> tails() const {
    std::map<std::pair<int, std::string>, int> last;
    for (int i = 0; i < next_id(); ++i) last[{prog.tasks()[i].core, prog.tasks()[i].engine}] = i;
    std::vector<int> ids;
    for (const auto& [k, id] : last) ids.push_back(id);
    return ids;
  }

  int memory_index(const std::string& name) const {
    return static_cast<int>(std::find(memories.begin(), memories.end(), name) - memories.begin());
  }

  Program prog;
  std::vector<std::string> memories;  // on-chip memories
  std::vector<Occupancy> occupancy;
  double l1_to_l0 = 0, l0c_to_ub = 0, macs = 0, spill = 0;
  int64_t launches = 0;

 private:
  const plan::Device& d_;
  Engines e_;
};

using KernelMask = unsigned;  // bit k: kernel k runs in this piece of work
constexpr KernelMask kAllKernels = ~0u;

// One plan's chunk on the device: emits the tasks of one chunk of one head (or head slice) on a core.
class ChunkLowering {
 public:
  ChunkLowering(const plan::Plan& pl, const plan::Device& d, SpillPlan spills)
      : pl_(pl), g_(pl.graph), d_(d), cm_(d), spills_(std::move(spills)) {
    for (int t = 0; t < static_cast<int>(g_.tensors.size()); ++t) {
      if (g_.tensors[t].role == plan::Role::kOutput) out_t_ = t;
    }
  }

  const plan::Graph& graph() const { return g_; }
  int64_t bytes(int t) const { return plan::tensor_bytes(g_, t, d_); }
  const SpillPlan& spills() const { return spills_; }

  // The ops of the kernels in `mask` of one chunk on `core`. `have` maps tensor -> the task that made it
  // available on this core (the incoming state, -1 when it is zero); tensors the ops read and `have`
  // lacks are loaded from global memory. Produced tensors are added to `have`; the output, and with
  // `store_handoffs` those a kernel outside `mask` reads, are stored. Every task depends on `gate`.
  void chunk(Emitter& em, int core, KernelMask mask, std::map<int, int>& have, int gate,
             bool store_handoffs = true) const {
    const Engines& e = em.engines();
    const int n = static_cast<int>(g_.ops.size());
    auto in_mask = [&](int kernel) { return (mask >> kernel) & 1u; };
    auto gated = [&](std::vector<int> deps) {
      if (gate >= 0) deps.push_back(gate);
      return deps;
    };
    auto dep = [&](int t) -> int {
      auto it = have.find(t);
      if (it != have.end()) return it->second;
      return have[t] = em.load(core, static_cast<double>(bytes(t)), gated({}), g_.tensors[t].name);
    };
    // Spill moves: stores after step s, reloads before step s (s = -1: chunk start, n: chunk end).
    std::map<int, int> stored;  // tensor -> its spill store
    auto spill_stores = [&](int step) {
      for (const SpillMove& m : spills_.moves) {
        if (m.after_step != step || !in_mask(m.kernel) || !m.store) continue;
        const auto it = have.find(m.tensor);
        if (it == have.end() || it->second < 0) continue;  // a zero state: nothing to keep
        stored[m.tensor] = em.store(core, static_cast<double>(m.bytes), {it->second}, "spill " + g_.tensors[m.tensor].name);
        em.spill += static_cast<double>(m.bytes);
      }
    };
    auto spill_reloads = [&](int step) {
      for (const SpillMove& m : spills_.moves) {
        if (m.before_step != step || !in_mask(m.kernel)) continue;
        std::vector<int> deps;
        if (stored.count(m.tensor)) {
          deps.push_back(stored[m.tensor]);
        } else if (have.count(m.tensor) && have[m.tensor] >= 0) {
          deps.push_back(have[m.tensor]);
        } else if (m.store) {
          continue;  // a zero state was never stored: nothing to bring back
        }
        have[m.tensor] = em.load(core, static_cast<double>(m.bytes), gated(deps), "reload " + g_.tensors[m.tensor].name);
        em.spill += static_cast<double>(m.bytes);
      }
    };
    std::vector<std::pair<int, int>> range(n, {-1, -1});  // task ids emitted for each step
    spill_stores(-1);
    for (int i = 0; i < n; ++i) {
      const plan::OpNode& o = g_.ops[i];
      if (!in_mask(o.kernel)) continue;
      const int begin = em.next_id();
      spill_reloads(i);
      std::vector<int> deps = gated({});
      double in_bytes = 0;
      for (int t : o.inputs) {
        const int p = dep(t);
        if (p >= 0) deps.push_back(p);
        in_bytes += static_cast<double>(bytes(t));
      }
      for (const plan::Transform& tr : pl_.layouts.transforms) {
        if (tr.before_op != i) continue;
        deps.push_back(em.compute(core, e.vector, tr.cost, deps, "transform " + g_.tensors[tr.tensor].name));
      }
      const double cycles = cm_.op_cost(g_, i, pl_.layouts.op_layout[i]);
      int last;
      if (o.engine == plan::Engine::kMatrix) {
        const int ld = em.transfer(core, e.matrix_load, in_bytes, d_.sim.l1_to_l0_bytes_per_cycle, false, 0, deps,
                                   "operands " + o.name);
        em.l1_to_l0 += in_bytes;
        em.macs += o.macs();
        const int mm = em.compute(core, e.matrix, cycles, {ld}, o.name);
        const double out_bytes = static_cast<double>(bytes(o.outputs[0]));
        em.l0c_to_ub += out_bytes;
        last = em.transfer(core, e.matrix_out, out_bytes, d_.sim.l0c_to_ub_bytes_per_cycle, false, 0, {mm},
                           "result " + o.name);
      } else {
        last = em.compute(core, e.vector, cycles, deps, o.name);
      }
      for (int t : o.outputs) {
        have[t] = last;
        if (t == out_t_ || (store_handoffs && read_outside(t, mask))) {
          em.store(core, static_cast<double>(bytes(t)), {last}, g_.tensors[t].name);
        }
      }
      spill_stores(i);
      range[i] = {begin, em.next_id() - 1};
    }
    spill_reloads(n);
    for (const plan::Transform& tr : pl_.layouts.transforms) {
      if (tr.before_op < 0 && have.count(tr.tensor)) {
        have[tr.tensor] = em.compute(core, e.vector, tr.cost, {have[tr.tensor]}, "transform " + g_.tensors[tr.tensor].name);
      }
    }
    // Occupancy: each presence from the first task of its first step to the last task of its last one.
    for (const plan::Residency& p : spills_.presence) {
      if (!in_mask(p.kernel)) continue;
      int first = -1, last = -1;
      for (int s = std::max(0, p.from); s <= std::min(n - 1, p.to); ++s) {
        if (range[s].first < 0) continue;
        if (first < 0) first = range[s].first;
        last = range[s].second;
      }
      if (first >= 0) em.occupancy.push_back({core, em.memory_index(p.memory), p.bytes, first, last});
    }
  }

  // `count` consecutive chunks of one head on `core`, the state carried from each to the next, starting
  // from the task that made `state` available (-1: a zero state). Returns the task of the last S'.
  int chain(Emitter& em, int core, KernelMask mask, int64_t count, int state, int gate,
            bool store_handoffs = true) const {
    for (int64_t c = 0; c < count; ++c) {
      std::map<int, int> have;
      have[g_.state_in] = state;
      chunk(em, core, mask, have, gate, store_handoffs);
      state = have[g_.state_out];
    }
    return state;
  }

  // Independent (head, chunk) units dealt round robin over the cores, each with kernels `mask`.
  void spread(Emitter& em, int cores, int64_t units, KernelMask mask, const std::vector<int>& gate) const {
    for (int64_t u = 0; u < units; ++u) {
      std::map<int, int> have;
      chunk(em, static_cast<int>(u % cores), mask, have, gate[u % cores]);
    }
  }

  // A head (or head slice) run through all its chunks on `core`, state on chip; the final state is stored.
  void head(Emitter& em, int core, int64_t chunks, int gate) const {
    const int state = chain(em, core, kAllKernels, chunks, -1, gate);
    em.store(core, static_cast<double>(bytes(g_.state_out)), {state}, "final state");
  }

 private:
  bool read_outside(int t, KernelMask mask) const {
    for (int c : g_.consumers(t)) {
      if (!((mask >> g_.ops[c].kernel) & 1u)) return true;
    }
    // S' becomes the next chunk's S: stored when a kernel outside the mask reads S.
    if (t == g_.state_out) {
      for (int c : g_.consumers(g_.state_in)) {
        if (!((mask >> g_.ops[c].kernel) & 1u)) return true;
      }
    }
    return false;
  }

  const plan::Plan& pl_;
  const plan::Graph& g_;
  const plan::Device& d_;
  plan::DeviceCostModel cm_;
  SpillPlan spills_;
  int out_t_ = -1;
};

// Each (head, chunk) becomes tens of tasks held in memory: bound the program (64 heads x 65,536 tokens is
// 65,536 units).
Status check_size(int64_t heads, int64_t chunks) {
  constexpr int64_t kMaxUnits = int64_t{1} << 18;
  if (heads * chunks > kMaxUnits) {
    return InvalidArgument("heads x chunks = " + std::to_string(heads * chunks) +
                           " is more than the model simulates in one run (" + std::to_string(kMaxUnits) + ")");
  }
  return Status::Ok();
}

Status make_lowering(const plan::Plan& pl, const plan::Device& d, std::unique_ptr<ChunkLowering>* out) {
  SpillPlan sp;
  HANPU_RETURN_IF_ERROR(plan_spills(pl.graph, d, &sp));
  *out = std::make_unique<ChunkLowering>(pl, d, std::move(sp));
  return Status::Ok();
}

// One phase's items on the model: gate[c] is what core c's items wait for (the launch or barrier).
void lower_phase(Emitter& em, const plan::Mapping& m, const plan::Phase& ph, std::size_t begin, std::size_t end,
                 const std::vector<int>& gate, const Workload& w,
                 const std::function<const ChunkLowering&(int64_t cols)>& lowering) {
  const ChunkLowering& low = lowering(m.shape.V);
  const double state_bytes = static_cast<double>(low.bytes(low.graph().state_out));
  const KernelMask mask = ph.kernels;
  for (std::size_t i = begin; i < end; ++i) {
    const plan::WorkItem& it = m.items[i];
    const int core = it.worker;
    switch (ph.work) {
      case plan::Work::kHead: lowering(it.cols).head(em, core, it.chunks, gate[core]); break;
      case plan::Work::kRecurrence: low.chain(em, core, mask, it.chunks, -1, gate[core]); break;
      case plan::Work::kWarmup: {
        // The recurrence from a zero state over the segment's last warm-up chunks; the end state to memory.
        const int state = low.chain(em, core, mask, std::min(w.warmup_chunks, it.chunks), -1, gate[core], false);
        em.store(core, state_bytes, {state}, "segment state");
        break;
      }
      case plan::Work::kHandOn:
        // Serially over the unit's segments: each segment's initial state handed on (read, written).
        for (int64_t s = 1; s * m.segment_chunks < it.chunks; ++s) {
          const int ld = em.load(core, state_bytes, {gate[core]}, "segment state");
          em.store(core, state_bytes, {ld}, "initial state");
        }
        break;
      case plan::Work::kSegment: {
        const int state = it.chunk0 == 0 ? -1 : em.load(core, state_bytes, {gate[core]}, "initial state");
        low.chain(em, core, mask, it.chunks, state, gate[core]);
        break;
      }
      default:  // per-chunk work: each chunk independent, intermediates through global memory
        for (int64_t c = 0; c < it.chunks; ++c) {
          std::map<int, int> have;
          low.chunk(em, core, mask, have, gate[core]);
        }
        break;
    }
  }
}

}  // namespace

Counter occupancy_counter(int core, const std::string& memory, std::vector<std::pair<double, int64_t>> deltas,
                          int64_t* peak) {
  std::sort(deltas.begin(), deltas.end());
  Counter c{core, memory, {}};
  int64_t level = 0;
  *peak = 0;
  for (const auto& [ns, b] : deltas) {
    level += b;
    *peak = std::max(*peak, level);
    if (!c.points.empty() && c.points.back().first == ns) c.points.back().second = level;
    else c.points.emplace_back(ns, level);
  }
  return c;
}

std::string chrome_trace(const Program& p, const Schedule& s, const std::string& title,
                         const std::vector<Counter>& counters) {
  nlohmann::json events = nlohmann::json::array();
  std::map<std::pair<int, std::string>, int> lane;  // (core, engine) -> thread id
  for (const Task& t : p.tasks()) lane.try_emplace({t.core, t.engine}, 0);
  int next = 0;
  std::set<int> cores;
  for (auto& [key, tid] : lane) {
    tid = next++;
    cores.insert(key.first);
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", key.first}, {"tid", tid},
                      {"args", {{"name", key.second}}}});
  }
  for (int c : cores) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", c}, {"args", {{"name", "core " + std::to_string(c)}}}});
  }
  int flow = 0;
  for (int i = 0; i < static_cast<int>(p.tasks().size()); ++i) {
    const Task& t = p.tasks()[i];
    const int tid = lane.at({t.core, t.engine});
    nlohmann::json args = {{"task", i}};
    if (t.bytes > 0) args["bytes"] = t.bytes;
    events.push_back({{"ph", "X"}, {"name", t.label}, {"pid", t.core}, {"tid", tid}, {"ts", s.start_ns[i] / 1e3},
                      {"dur", (s.end_ns[i] - s.start_ns[i]) / 1e3}, {"args", args}});
    // Flow arrows for dependencies that cross engines (or cores).
    for (int d : t.deps) {
      const Task& u = p.tasks()[d];
      if (u.core == t.core && u.engine == t.engine) continue;
      events.push_back({{"ph", "s"}, {"id", flow}, {"name", "dep"}, {"cat", "dep"}, {"pid", u.core},
                        {"tid", lane.at({u.core, u.engine})}, {"ts", s.end_ns[d] / 1e3}});
      events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow}, {"name", "dep"}, {"cat", "dep"}, {"pid", t.core},
                        {"tid", tid}, {"ts", s.start_ns[i] / 1e3}});
      ++flow;
    }
  }
  for (const Counter& c : counters) {
    for (const auto& [ns, b] : c.points) {
      events.push_back({{"ph", "C"}, {"name", c.memory + " bytes"}, {"pid", c.core}, {"ts", ns / 1e3},
                        {"args", {{c.memory, b}}}});
    }
  }
  return nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", {{"title", title}}}}).dump() +
         "\n";
}

Status simulate_strategy(const std::string& name, const plan::Device& d, const Workload& w, SimRecord* out,
                         std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  if (!plan::find_strategy(name)) return plan::unknown_strategy(name, true);
  if (w.heads < 1 || w.tokens < 1) return InvalidArgument("heads and tokens must be >= 1");
  if (w.warmup_chunks < 1) return InvalidArgument("warmup_chunks must be >= 1");
  plan::PlanOptions po;
  po.C = w.C;
  po.K = w.K;
  po.V = w.V;
  plan::MapRequest req;
  req.shape.seq_tokens = {w.tokens};
  req.shape.C = w.C;
  req.shape.HV = w.heads;
  req.shape.V = w.V;
  req.shape.workers = d.cores;
  req.segment_chunks = w.segment_chunks;
  HANPU_RETURN_IF_ERROR(check_size(w.heads, (w.tokens + w.C - 1) / w.C));
  plan::Plan pl;
  HANPU_RETURN_IF_ERROR(plan::make_execution_plan(w.kind, d, name, po, req, &pl));
  return simulate_plan(pl, d, w, out, trace);
}

Status simulate_plan(const plan::Plan& pl, const plan::Device& d, const Workload& w, SimRecord* out, std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  if (!pl.has_mapping) return InvalidArgument("plan has no mapping (make it with hanpu plan --strategy ...)");
  if (pl.device != d.name) return InvalidArgument("plan is for device '" + pl.device + "', not '" + d.name + "'");
  const plan::Mapping& m = pl.mapping;
  if (m.shape.workers != d.cores) {
    return InvalidArgument("plan maps work onto " + std::to_string(m.shape.workers) + " workers, device '" + d.name +
                           "' has " + std::to_string(d.cores) + " cores");
  }
  if (w.warmup_chunks < 1) return InvalidArgument("warmup_chunks must be >= 1");
  HANPU_RETURN_IF_ERROR(check_size(m.shape.units(), m.shape.total_chunks() / std::max<int64_t>(1, m.shape.sequences())));
  for (const plan::Phase& ph : m.phases) {
    if (ph.work == plan::Work::kPrepare || ph.work == plan::Work::kStatePart) {
      return InvalidArgument("the NPU model does not lower the CPU's chunk-parallel fallback (phase '" +
                             std::string(plan::work_name(ph.work)) + "')");
    }
  }
  // One lowering per column width: the whole head's plan, and a slice plan for each narrower width.
  std::map<int64_t, std::unique_ptr<ChunkLowering>> lowerings;
  std::map<int64_t, plan::Plan> slice_plans;
  HANPU_RETURN_IF_ERROR(make_lowering(pl, d, &lowerings[m.shape.V]));
  for (const plan::WorkItem& it : m.items) {
    if (lowerings.count(it.cols)) continue;
    HANPU_RETURN_IF_ERROR(plan::make_slice_plan(pl, d, it.cols, &slice_plans[it.cols]));
    HANPU_RETURN_IF_ERROR(make_lowering(slice_plans[it.cols], d, &lowerings[it.cols]));
  }
  const auto lowering = [&](int64_t cols) -> const ChunkLowering& { return *lowerings.at(cols); };
  const int cores = d.cores;
  Emitter em(d);
  const auto ranges = m.phase_ranges();
  std::vector<int> gate;
  for (std::size_t p = 0; p < m.phases.size(); ++p) {
    if (p == 0) gate = em.launch(cores, {});
    else if (m.phases[p].sync == plan::Sync::kLaunch) gate = em.launch(cores, em.tails());
    else gate = em.sync(cores, em.tails(), d.sim.barrier_us, "barrier");
    lower_phase(em, m, m.phases[p], ranges[p].first, ranges[p].second, gate, w, lowering);
  }
  const ChunkLowering& low = *lowerings.at(m.shape.V);
  Machine machine;
  machine.clock_ghz = d.clock_ghz;
  machine.global_bytes_per_ns = d.sim.global_gbps;
  Schedule s;
  HANPU_RETURN_IF_ERROR(simulate(em.prog, machine, &s));
  // Occupancy over time per (core, buffer): +bytes at the first task's start, -bytes at the last's end.
  std::map<std::pair<int, int>, std::vector<std::pair<double, int64_t>>> deltas;
  for (const Occupancy& o : em.occupancy) {
    auto& v = deltas[{o.core, o.memory}];
    v.emplace_back(s.start_ns[o.first_task], o.bytes);
    v.emplace_back(s.end_ns[o.last_task], -o.bytes);
  }
  std::vector<Counter> counters;
  SimRecord r;
  for (auto& [key, v] : deltas) {
    const std::string& mem = em.memories[key.second];
    int64_t peak = 0;
    counters.push_back(occupancy_counter(key.first, mem, std::move(v), &peak));
    r.sim_peak_bytes[mem] = std::max(r.sim_peak_bytes[mem], peak);
  }
  if (trace) *trace = chrome_trace(em.prog, s, d.name + " " + pl.strategy, counters);
  r.device = d.name;
  r.strategy = pl.strategy;
  r.kind = kind_name(pl.kind);
  r.tokens = m.shape.seq_tokens.empty() ? 0 : m.shape.seq_tokens[0];
  r.heads = m.shape.HV;
  r.latency_us = s.makespan_ns / 1e3;
  r.gm_bytes = s.global_bytes;
  r.spill_bytes = em.spill;
  r.l1_to_l0_bytes = em.l1_to_l0;
  r.matrix_macs = em.macs;
  r.tasks = static_cast<int64_t>(em.prog.tasks().size());
  r.launches = em.launches;
  r.tail_split = m.tail_split;
  const double core_ns = s.makespan_ns * cores;
  r.matrix_util = r.matrix_macs / (core_ns * d.clock_ghz * d.matrix_macs_per_cycle);
  std::map<std::string, double> busy;
  for (const auto& [key, ns] : s.busy_ns) busy[key.second] += ns;
  for (const auto& [engine, ns] : busy) r.engine_busy[engine] = ns / core_ns;
  r.peak_bytes = low.spills().peak_bytes;
  for (const auto& [cols, l] : lowerings) {
    for (const auto& [mem, b] : l->spills().peak_bytes) r.peak_bytes[mem] = std::max(r.peak_bytes[mem], b);
  }
  const std::string& vec = em.engines().vector;
  r.vector_util = r.engine_busy.count(vec) ? r.engine_busy[vec] : 0;
  // Energy: dynamic (MACs, vector cycles, global and on-chip bytes) plus static power over the latency.
  const double vector_cycles = (busy.count(vec) ? busy[vec] : 0) * d.clock_ghz;
  const double dynamic_pj = r.matrix_macs * d.sim.pj_per_mac + vector_cycles * d.sim.pj_per_vector_cycle +
                            r.gm_bytes * d.sim.pj_per_global_byte +
                            (em.l1_to_l0 + em.l0c_to_ub) * d.sim.pj_per_on_chip_byte;
  r.energy_uj = dynamic_pj * 1e-6 + d.sim.static_w * r.latency_us;
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace hanpu::sim
