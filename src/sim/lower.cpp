#include "sim/lower.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "plan/strategy.h"
#include "sim/chunk_lowering.h"
#include "sim/native_ops.h"

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

// The program of one run, shared by the chunk lowerings that emit into it: the device's engine queues per
// core, transfers at their paths' rates (global ones with the set-up and the shared bandwidth).
class Emitter : public ChunkSink {
 public:
  explicit Emitter(const plan::Device& d) : d_(d), e_(engines_of(d)) {
    for (const plan::Memory& m : d.memories) {
      if (m.on_chip) memories.push_back(m.name);
    }
  }

  const Engines& engines() const { return e_; }
  int next_id() const override { return static_cast<int>(prog.tasks().size()); }

  int compute(int core, Queue q, double cycles, std::vector<int> deps, std::string label) override {
    return add(core, q == Queue::kMatrix ? e_.matrix : e_.vector, cycles, std::move(deps), std::move(label));
  }

  int move(int core, Queue q, double bytes, std::vector<int> deps, std::string label) override {
    const plan::SimParams& s = d_.sim;
    switch (q) {
      case Queue::kLoad:
        return transfer(core, e_.load, bytes, s.global_read_bytes_per_cycle, true, s.transfer_setup_cycles,
                        std::move(deps), "load " + label);
      case Queue::kStore:
        return transfer(core, e_.store, bytes, s.global_write_bytes_per_cycle, true, s.transfer_setup_cycles,
                        std::move(deps), "store " + label);
      case Queue::kMatrixLoad:
        return transfer(core, e_.matrix_load, bytes, s.l1_to_l0_bytes_per_cycle, false, 0, std::move(deps), label);
      case Queue::kForward:
        return transfer(core, e_.store, bytes, s.ub_to_l1_bytes_per_cycle, false, 0, std::move(deps), label);
      default:
        return transfer(core, e_.matrix_out, bytes, s.l0c_to_ub_bytes_per_cycle, false, 0, std::move(deps), label);
    }
  }

  int chunk_end_before(int core, int back) override {
    const std::vector<int>& ends = chunk_ends_[core];
    return back >= 1 && static_cast<int>(ends.size()) >= back ? ends[ends.size() - back] : -1;
  }
  void chunk_end(int core, int last) override { chunk_ends_[core].push_back(last); }
  // Queues run in order (Machine::issue_ready_first is off here): the last of `deps` on each queue stands for
  // the others.
  int join(int core, std::vector<int> deps) override {
    std::map<std::string, int> last;
    for (int id : deps) last[prog.tasks()[id].engine] = std::max(last[prog.tasks()[id].engine], id);
    std::vector<int> tails;
    for (const auto& [engine, id] : last) tails.push_back(id);
    return add(core, e_.control, 0, std::move(tails), "chunk end");
  }

  void occupy(int core, const std::string& memory, int64_t bytes, int first, int last) override {
    const int m = static_cast<int>(std::find(memories.begin(), memories.end(), memory) - memories.begin());
    occupancy.push_back({core, m, bytes, first, last});
  }

  // A synchronisation point on every core: waits for `after`, then costs `us` (a launch or a barrier).
  std::vector<int> sync(int cores, const std::vector<int>& after, double us, const std::string& label) {
    std::vector<int> ids;
    for (int c = 0; c < cores; ++c) ids.push_back(add(c, e_.control, us * 1e3 * d_.clock_ghz, after, label));
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

  Program prog;
  std::vector<std::string> memories;  // on-chip memories
  std::vector<Occupancy> occupancy;
  int64_t launches = 0;

 private:
  int add(int core, const std::string& engine, double cycles, std::vector<int> deps, std::string label) {
    return transfer(core, engine, 0, 0, false, cycles, std::move(deps), std::move(label));
  }
  // A transfer: `setup` cycles, then `b` bytes at `rate` bytes/cycle (or the global share); b = 0 is
  // plain work of `setup` cycles.
  int transfer(int core, const std::string& engine, double b, double rate, bool global, double setup,
               std::vector<int> deps, std::string label) {
    Task t;
    t.core = core;
    t.engine = engine;
    t.cycles = setup;
    t.deps = std::move(deps);
    t.label = std::move(label);
    t.bytes = b;
    t.path_bytes_per_cycle = rate;
    t.global = global;
    return prog.add(std::move(t));
  }

  const plan::Device& d_;
  Engines e_;
  std::map<int, std::vector<int>> chunk_ends_;  // per core, the last task of each chunk lowered there
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


// Occupancy over time per (core, buffer): +bytes at the first task's start, -bytes at the last's end; the
// highest level of each buffer over the cores goes to `peaks`.
std::vector<Counter> occupancy_counters(const Emitter& em, const Schedule& s, std::map<std::string, int64_t>* peaks) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, int64_t>>> deltas;
  for (const Occupancy& o : em.occupancy) {
    auto& v = deltas[{o.core, o.memory}];
    v.emplace_back(s.start_ns[o.first_task], o.bytes);
    v.emplace_back(s.end_ns[o.last_task], -o.bytes);
  }
  std::vector<Counter> counters;
  for (auto& [key, v] : deltas) {
    const std::string& mem = em.memories[key.second];
    int64_t peak = 0;
    counters.push_back(occupancy_counter(key.first, mem, std::move(v), &peak));
    (*peaks)[mem] = std::max((*peaks)[mem], peak);
  }
  return counters;
}

// Energy: dynamic (MACs, vector cycles, global and on-chip bytes) plus static power over the latency.
double energy_uj(const plan::Device& d, const SimRecord& r, double vector_cycles, const ChunkSink::Counts& c) {
  const double dynamic_pj = r.matrix_macs * d.sim.pj_per_mac + vector_cycles * d.sim.pj_per_vector_cycle +
                            r.gm_bytes * d.sim.pj_per_global_byte + (c.l1_to_l0 + c.l0c_to_ub + c.forward) * d.sim.pj_per_on_chip_byte;
  return dynamic_pj * 1e-6 + d.sim.static_w * r.latency_us;
}

// One launch of a phase's items on the model (the kernels in `mask`): gate[c] is what core c's items wait
// for (the launch or barrier).
void lower_phase(Emitter& em, const plan::Mapping& m, const plan::Phase& ph, KernelMask mask, std::size_t begin,
                 std::size_t end, const std::vector<int>& gate, const Workload& w,
                 const std::function<const ChunkLowering&(int64_t cols)>& lowering) {
  const ChunkLowering& low = lowering(m.shape.V);
  const double state_bytes = static_cast<double>(low.bytes(low.graph().state_out));
  for (std::size_t i = begin; i < end; ++i) {
    const plan::WorkItem& it = m.items[i];
    const int core = it.worker;
    switch (ph.work) {
      case plan::Work::kHead: lowering(it.cols).head(em, core, it.chunks, gate[core]); break;
      case plan::Work::kRecurrence: low.chain(em, core, mask, it.chunks, -1, gate[core]); break;
      case plan::Work::kWarmup: {
        // The recurrence from a zero state over the segment's last warm-up chunks; the end state to memory.
        const int state = low.chain(em, core, mask, std::min(w.warmup_chunks, it.chunks), -1, gate[core], false);
        em.move(core, ChunkSink::Queue::kStore, state_bytes, {state}, "segment state");
        break;
      }
      case plan::Work::kHandOn:
        // Serially over the unit's segments: each segment's initial state handed on (read, written).
        for (int64_t s = 1; s * m.segment_chunks < it.chunks; ++s) {
          const int ld = em.move(core, ChunkSink::Queue::kLoad, state_bytes, {gate[core]}, "segment state");
          em.move(core, ChunkSink::Queue::kStore, state_bytes, {ld}, "initial state");
        }
        break;
      case plan::Work::kSegment: {
        const int state =
            it.chunk0 == 0 ? -1 : em.move(core, ChunkSink::Queue::kLoad, state_bytes, {gate[core]}, "initial state");
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

// native: each framework operator is a launch over the units the mapping puts on each core ((value head,
// chunk) units as its per-chunk phases deal them; value heads as its recurrence deals them), reading its
// inputs from global memory and writing its result there (sim/native_ops.h). A matrix operator's fp32
// operands are cast for the matrix unit and forwarded to its memory where that is not the vector memory.
void lower_native(Emitter& em, const plan::Mapping& m, const plan::Device& d, const NativeProgram& prog) {
  using Queue = ChunkSink::Queue;
  const int cores = d.cores;
  std::vector<int64_t> units(cores), heads(cores);
  int64_t chunks = 0;
  for (const plan::WorkItem& it : m.items) {
    const plan::Work w = m.phases[it.phase].work;
    if (w == plan::Work::kLoad) units[it.worker] += it.chunks;
    if (w == plan::Work::kRecurrence) {
      heads[it.worker] += 1;
      chunks = std::max(chunks, it.chunks);
    }
  }
  const bool separate = d.matrix_operand_mem != d.vector_mem;
  auto run = [&](const FrameworkOp& op, const std::vector<int64_t>& per_core) {
    plan::OpNode gemm;  // the matrix operator's GEMM per unit, for its algebraic and executed MACs
    gemm.kind = plan::OpKind::kGemm;
    gemm.m = op.m;
    gemm.n = op.n;
    gemm.k = op.k;
    ++em.launches;
    const std::vector<int> gate = em.sync(cores, em.tails(), d.sim.framework_op_us, "op " + op.name);
    for (int c = 0; c < cores; ++c) {
      const double n = static_cast<double>(per_core[c]);
      if (n == 0) continue;
      int last = gate[c];
      if (op.in_elems > 0) last = em.move(c, Queue::kLoad, n * op.in_elems * 4, {last}, op.name);
      if (op.matrix) {
        last = em.compute(c, Queue::kVector, d.vector_cycles(n * op.in_elems * 4), {last}, "cast " + op.name);
        em.counts.cast += n * op.in_elems;
        if (separate) {
          last = em.move(c, Queue::kForward, n * op.in_elems * d.operand_bytes, {last}, "forward " + op.name);
          em.counts.forward += n * op.in_elems * d.operand_bytes;
        }
        last = em.move(c, Queue::kMatrixLoad, n * op.in_elems * d.operand_bytes, {last}, "operands " + op.name);
        em.counts.l1_to_l0 += n * op.in_elems * d.operand_bytes;
        const double executed = gemm.executed_macs(d.block_rows, d.block_cols);
        em.counts.macs += n * gemm.macs();
        em.counts.executed_macs += n * executed;
        last = em.compute(c, Queue::kMatrix, n * executed / d.matrix_macs_per_cycle, {last}, op.name);
        last = em.move(c, Queue::kMatrixOut, n * op.out_elems * 4, {last}, "result " + op.name);
        em.counts.l0c_to_ub += n * op.out_elems * 4;
      } else {
        last = em.compute(c, Queue::kVector, d.vector_cycles(n * op.out_elems * 4), {last}, op.name);
      }
      if (op.out_elems > 0) em.move(c, Queue::kStore, n * op.out_elems * 4, {last}, op.name);
    }
  };
  for (const FrameworkOp& op : prog.before) run(op, units);
  for (int64_t i = 0; i < chunks; ++i) {
    for (const FrameworkOp& op : prog.per_chunk) run(op, heads);
  }
  for (const FrameworkOp& op : prog.after) run(op, units);
}

// Per core, the union of the time global-memory transfers are in flight, over the makespan; averaged over cores.
double global_share(const Program& p, const Schedule& s, int cores) {
  if (s.makespan_ns <= 0) return 0;
  std::map<int, std::vector<std::pair<double, double>>> spans;
  for (std::size_t i = 0; i < p.tasks().size(); ++i)
    if (p.tasks()[i].global) spans[p.tasks()[i].core].emplace_back(s.start_ns[i], s.end_ns[i]);
  double total = 0;
  for (auto& [core, v] : spans) {
    std::sort(v.begin(), v.end());
    double covered = 0, a = -1, b = -1;
    for (const auto& [lo, hi] : v) {
      if (lo > b) {
        covered += b - a;
        a = lo;
        b = hi;
      } else {
        b = std::max(b, hi);
      }
    }
    covered += b - a;
    total += covered;
  }
  return total / (s.makespan_ns * cores);
}

// Busy time of the layout transforms over that of all cross-unit work (transforms, operand moves into the
// matrix unit: forwards from the vector memory and L1 -> L0 loads, result moves out of it).
double transform_share(const Program& p, const Schedule& s, const Engines& e) {
  double transforms = 0, moves = 0;
  for (std::size_t i = 0; i < p.tasks().size(); ++i) {
    const Task& t = p.tasks()[i];
    const double ns = s.end_ns[i] - s.start_ns[i];
    if (t.label.rfind("transform ", 0) == 0) transforms += ns;
    else if (t.engine == e.matrix_load || t.engine == e.matrix_out || t.label.rfind("forward ", 0) == 0) moves += ns;
  }
  return transforms + moves > 0 ? transforms / (transforms + moves) : 0;
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
  const plan::StrategyInfo* info = plan::find_strategy(pl.strategy);
  if (info != nullptr && info->opt.dataflow == plan::Dataflow::kNative) {
    lower_native(em, m, d, native_program(pl.kind, m.shape.C, pl.graph.K, m.shape.V));
  } else {
    // A phase's separate launches (Phase::launches) are barriers inside a megakernel (a mapping with any).
    const auto ranges = m.phase_ranges();
    const bool megakernel = std::any_of(m.phases.begin(), m.phases.end(),
                                        [](const plan::Phase& ph) { return ph.sync == plan::Sync::kBarrier; });
    std::vector<int> gate;
    for (std::size_t p = 0; p < m.phases.size(); ++p) {
      const plan::Phase& ph = m.phases[p];
      const std::vector<unsigned> launches = ph.launches.empty() ? std::vector<unsigned>{ph.kernels} : ph.launches;
      for (std::size_t l = 0; l < launches.size(); ++l) {
        const bool barrier = l == 0 ? ph.sync == plan::Sync::kBarrier : megakernel;
        if (p == 0 && l == 0) gate = em.launch(cores, {});
        else if (!barrier) gate = em.launch(cores, em.tails());
        else gate = em.sync(cores, em.tails(), d.sim.barrier_us, "barrier");
        lower_phase(em, m, ph, launches[l], ranges[p].first, ranges[p].second, gate, w, lowering);
      }
    }
  }
  const ChunkLowering& low = *lowerings.at(m.shape.V);
  Machine machine;
  machine.clock_ghz = d.clock_ghz;
  machine.global_bytes_per_ns = d.sim.global_gbps;
  Schedule s;
  HANPU_RETURN_IF_ERROR(simulate(em.prog, machine, &s));
  SimRecord r;
  const std::vector<Counter> counters = occupancy_counters(em, s, &r.sim_peak_bytes);
  if (trace) *trace = chrome_trace(em.prog, s, d.name + " " + pl.strategy, counters);
  r.device = d.name;
  r.strategy = pl.strategy;
  r.kind = kind_name(pl.kind);
  r.tokens = m.shape.seq_tokens.empty() ? 0 : m.shape.seq_tokens[0];
  r.heads = m.shape.HV;
  r.latency_us = s.makespan_ns / 1e3;
  r.gm_bytes = s.global_bytes;
  r.spill_bytes = em.counts.spill;
  r.l1_to_l0_bytes = em.counts.l1_to_l0;
  r.matrix_macs = em.counts.macs;
  r.executed_macs = em.counts.executed_macs;
  r.gm_share = global_share(em.prog, s, cores);
  r.transform_share = transform_share(em.prog, s, em.engines());
  {
    const plan::Graph& g = low.graph();
    double inputs = 0, stores = 0, scratch = 0;
    for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t)
      if (g.tensors[t].role == plan::Role::kInput) inputs += static_cast<double>(low.bytes(t));
    for (const Task& t : em.prog.tasks())
      if (t.global && t.engine == em.engines().store) stores += t.bytes;
    for (const SpillMove& mv : low.spills().moves)
      if (mv.store) scratch += static_cast<double>(mv.bytes);
    r.gm_footprint_bytes = inputs * static_cast<double>(m.shape.HV * m.shape.total_chunks()) + stores -
                           em.counts.spill_store + scratch * cores;
  }
  r.tasks = static_cast<int64_t>(em.prog.tasks().size());
  r.launches = em.launches;
  r.tail_split = m.tail_split;
  const double core_ns = s.makespan_ns * cores;
  r.matrix_util = r.matrix_macs / (core_ns * d.clock_ghz * d.matrix_macs_per_cycle);
  std::map<std::string, double> busy;
  for (const auto& [key, ns] : s.busy_ns) busy[key.second] += ns;
  for (const auto& [engine, ns] : busy) r.engine_busy[engine] = ns / core_ns;
  r.peak_bytes = low.spills().peak_bytes;
  r.tiled_steps = static_cast<int>(low.spills().tiled.size());
  for (const auto& [cols, l] : lowerings) {
    for (const auto& [mem, b] : l->spills().peak_bytes) r.peak_bytes[mem] = std::max(r.peak_bytes[mem], b);
  }
  const std::string& vec = em.engines().vector;
  r.vector_util = r.engine_busy.count(vec) ? r.engine_busy[vec] : 0;
  r.energy_uj = energy_uj(d, r, (busy.count(vec) ? busy[vec] : 0) * d.clock_ghz, em.counts);
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace hanpu::sim
