#include "sim/lower.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace hanpu::sim {

const std::vector<std::string>& sim_strategies() {
  static const std::vector<std::string> s = {"fla", "hanpu"};
  return s;
}

namespace {

// Queue names of a device's engines.
struct Engines {
  std::string load, store, matrix_load, matrix, matrix_out, vector, launch;
};

Engines engines_of(const plan::Device& d) {
  if (d.name.rfind("hexagon", 0) == 0) return {"DMA", "DMA", "HMX-load", "HMX", "HMX-out", "HVX", "Scalar"};
  return {"MTE2", "MTE3", "MTE1", "Cube", "FixPipe", "Vector", "Scalar"};
}

// Emits the tasks of one program on the device and keeps the counters of the report.
class Lowering {
 public:
  Lowering(const plan::Plan& pl, const plan::Device& d) : pl_(pl), g_(pl.graph), d_(d), cm_(d), e_(engines_of(d)) {}

  Program& program() { return prog_; }
  double l1_to_l0_bytes() const { return l1_to_l0_; }
  double matrix_macs() const { return macs_; }

  int64_t bytes(int t) const { return plan::tensor_bytes(g_, t, d_); }

  int load(int core, int t, std::vector<int> deps) {
    return transfer(core, e_.load, static_cast<double>(bytes(t)), d_.sim.global_read_bytes_per_cycle, true,
                    d_.sim.transfer_setup_cycles, std::move(deps), "load " + g_.tensors[t].name);
  }
  int store(int core, int t, std::vector<int> deps) {
    return transfer(core, e_.store, static_cast<double>(bytes(t)), d_.sim.global_write_bytes_per_cycle, true,
                    d_.sim.transfer_setup_cycles, std::move(deps), "store " + g_.tensors[t].name);
  }

  // One launch per core: waits for `after` (the previous launch's queue tails) plus the overhead.
  std::vector<int> launch(int cores, const std::vector<int>& after) {
    std::vector<int> ids;
    const double cycles = d_.sim.launch_overhead_us * 1e3 * d_.clock_ghz;
    for (int c = 0; c < cores; ++c) ids.push_back(compute(c, e_.launch, cycles, after, "launch"));
    return ids;
  }

  // The ops of kernel `kernel` (-1: all) of one chunk on `core`. `have` maps tensor -> producing task for
  // tensors already available on this core (inputs loaded, the incoming state); tensors the ops read and
  // `have` lacks are loaded from global memory. Produced tensors are added to `have`; those a later
  // kernel reads are stored. Every task depends on `gate` (the core's launch).
  void chunk(int core, int kernel, std::map<int, int>& have, int gate) {
    auto dep = [&](int t) -> int {
      auto it = have.find(t);
      if (it != have.end()) return it->second;
      const int id = load(core, t, gate >= 0 ? std::vector<int>{gate} : std::vector<int>{});
      have[t] = id;
      return id;
    };
    for (int i = 0; i < static_cast<int>(g_.ops.size()); ++i) {
      const plan::OpNode& o = g_.ops[i];
      if (kernel >= 0 && o.kernel != kernel) continue;
      std::vector<int> deps;
      if (gate >= 0) deps.push_back(gate);
      double in_bytes = 0;
      for (int t : o.inputs) {
        const int p = dep(t);
        if (p >= 0) deps.push_back(p);
        in_bytes += static_cast<double>(bytes(t));
      }
      for (const plan::Transform& tr : pl_.layouts.transforms) {
        if (tr.before_op != i) continue;
        deps.push_back(compute(core, e_.vector, tr.cost, deps, "transform " + g_.tensors[tr.tensor].name));
      }
      const double cycles = cm_.op_cost(g_, i, pl_.layouts.op_layout[i]);
      int last;
      if (o.engine == plan::Engine::kMatrix) {
        const int ld = transfer(core, e_.matrix_load, in_bytes, d_.sim.l1_to_l0_bytes_per_cycle, false, 0, deps,
                                "operands " + o.name);
        l1_to_l0_ += in_bytes;
        macs_ += o.macs();
        const int mm = compute(core, e_.matrix, cycles, {ld}, o.name);
        last = transfer(core, e_.matrix_out, static_cast<double>(bytes(o.outputs[0])), d_.sim.l0c_to_ub_bytes_per_cycle,
                        false, 0, {mm}, "result " + o.name);
      } else {
        last = compute(core, e_.vector, cycles, deps, o.name);
      }
      for (int t : o.outputs) {
        have[t] = last;
        if (kernel >= 0 && read_by_other_kernel(t, kernel)) store(core, t, {last});
      }
    }
    for (const plan::Transform& tr : pl_.layouts.transforms) {
      if (tr.before_op < 0 && have.count(tr.tensor)) {
        have[tr.tensor] = compute(core, e_.vector, tr.cost, {have[tr.tensor]}, "transform " + g_.tensors[tr.tensor].name);
      }
    }
  }

  // Tail task ids of every queue so far (what a following launch waits for).
  std::vector<int> tails() const {
    std::map<std::pair<int, std::string>, int> last;
    for (int i = 0; i < static_cast<int>(prog_.tasks().size()); ++i) {
      last[{prog_.tasks()[i].core, prog_.tasks()[i].engine}] = i;
    }
    std::vector<int> ids;
    for (const auto& [k, id] : last) ids.push_back(id);
    return ids;
  }

  const Engines& engines() const { return e_; }

 private:
  bool read_by_other_kernel(int t, int kernel) const {
    for (int c : g_.consumers(t)) {
      if (g_.ops[c].kernel != kernel) return true;
    }
    // S' becomes the next chunk's S: stored when another kernel reads S.
    if (t == g_.state_out) {
      for (int c : g_.consumers(g_.state_in)) {
        if (g_.ops[c].kernel != kernel) return true;
      }
    }
    return false;
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

  int compute(int core, const std::string& engine, double cycles, std::vector<int> deps, std::string label) {
    return prog_.add(task(core, engine, cycles, std::move(deps), std::move(label)));
  }

  // A transfer: `setup` cycles, then `b` bytes at `rate` bytes/cycle (or the global share).
  int transfer(int core, const std::string& engine, double b, double rate, bool global, double setup,
               std::vector<int> deps, std::string label) {
    Task t = task(core, engine, setup, std::move(deps), std::move(label));
    t.bytes = b;
    t.path_bytes_per_cycle = rate;
    t.global = global;
    return prog_.add(t);
  }

  const plan::Plan& pl_;
  const plan::Graph& g_;
  const plan::Device& d_;
  plan::DeviceCostModel cm_;
  Engines e_;
  Program prog_;
  double l1_to_l0_ = 0, macs_ = 0;
};

}  // namespace

std::string chrome_trace(const Program& p, const Schedule& s, const std::string& title) {
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
  return nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", {{"title", title}}}}).dump() +
         "\n";
}

const std::vector<std::string>& sim_ablation_steps() {
  static const std::vector<std::string> s = {"fla", "+fusion", "+chunk-first", "+gemm-first", "+layout-plan"};
  return s;
}

Status simulate_strategy(const std::string& name, const plan::Device& d, const Workload& w, SimRecord* out,
                         std::string* trace) {
  if (!d.has_sim) return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  const auto& steps = sim_ablation_steps();
  const bool known = std::find(sim_strategies().begin(), sim_strategies().end(), name) != sim_strategies().end() ||
                     std::find(steps.begin(), steps.end(), name) != steps.end();
  if (!known) {
    return InvalidArgument("strategy '" + name + "' is not modelled (modelled: fla, hanpu, and the ablation steps "
                           "+fusion, +chunk-first, +gemm-first, +layout-plan)");
  }
  if (w.heads < 1 || w.tokens < 1) return InvalidArgument("heads and tokens must be >= 1");
  // The ablation adds hanpu's techniques to head-level fusion one at a time; +layout-plan is hanpu.
  const std::string strategy = name == "fla" ? "fla" : "hanpu";
  plan::Plan pl;
  plan::PlanOptions po;
  po.C = w.C;
  po.K = w.K;
  po.V = w.V;
  po.reorder = name != "+fusion";
  po.gemm_first = name != "+fusion" && name != "+chunk-first";
  po.layout_plan = name == "hanpu" || name == "+layout-plan";
  HANPU_RETURN_IF_ERROR(plan::make_plan(w.kind, d, po, &pl));
  if (strategy == "fla") {
    // FLA's own order and launches (no planner passes, the fixed layouts).
    plan::GraphOptions go;
    go.chunk_first = go.gemm_first = false;
    go.kernels = "fla";
    pl.graph = plan::build_chunk_graph(w.kind, w.C, w.K, w.V, go);
    pl.layouts = plan::fixed_layouts(pl.graph, plan::DeviceCostModel(d));
  }
  const plan::Graph& g = pl.graph;
  const int cores = d.cores;
  const int64_t chunks = (w.tokens + w.C - 1) / w.C;
  Lowering low(pl, d);
  int out_t = -1;
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    if (g.tensors[t].role == plan::Role::kOutput) out_t = t;
  }
  if (strategy == "hanpu") {
    const std::vector<int> gate = low.launch(cores, {});
    for (int64_t h = 0; h < w.heads; ++h) {
      const int core = static_cast<int>(h % cores);
      int state = -1;  // the previous chunk's S' (a zero initial state for the first chunk: nothing to load)
      for (int64_t c = 0; c < chunks; ++c) {
        std::map<int, int> have;
        have[g.state_in] = state;
        low.chunk(core, -1, have, gate[core]);
        state = have[g.state_out];
        low.store(core, out_t, {have[out_t]});
      }
    }
  } else {
    std::vector<int> gate = low.launch(cores, {});
    for (int kernel = 0; kernel < 3; ++kernel) {
      if (kernel > 0) gate = low.launch(cores, low.tails());
      if (kernel == 1) {
        for (int64_t h = 0; h < w.heads; ++h) {
          const int core = static_cast<int>(h % cores);
          int state = -1;
          for (int64_t c = 0; c < chunks; ++c) {
            std::map<int, int> have;
            have[g.state_in] = state;
            low.chunk(core, kernel, have, gate[core]);
            state = have[g.state_out];
          }
        }
      } else {
        for (int64_t u = 0; u < w.heads * chunks; ++u) {
          const int core = static_cast<int>(u % cores);
          std::map<int, int> have;
          low.chunk(core, kernel, have, gate[core]);
          if (kernel == 2) low.store(core, out_t, {have[out_t]});
        }
      }
    }
  }
  Machine m;
  m.clock_ghz = d.clock_ghz;
  m.global_bytes_per_ns = d.sim.global_gbps;
  Schedule s;
  HANPU_RETURN_IF_ERROR(simulate(low.program(), m, &s));
  if (trace) *trace = chrome_trace(low.program(), s, d.name + " " + name);
  SimRecord r;
  r.strategy = name;
  r.kind = kind_name(w.kind);
  r.tokens = w.tokens;
  r.heads = w.heads;
  r.latency_us = s.makespan_ns / 1e3;
  r.gm_bytes = s.global_bytes;
  r.l1_to_l0_bytes = low.l1_to_l0_bytes();
  r.matrix_macs = low.matrix_macs();
  r.tasks = static_cast<int64_t>(low.program().tasks().size());
  const double core_ns = s.makespan_ns * cores;
  r.matrix_util = r.matrix_macs / (core_ns * d.clock_ghz * d.matrix_macs_per_cycle);
  std::map<std::string, double> busy;
  for (const auto& [key, ns] : s.busy_ns) busy[key.second] += ns;
  for (const auto& [name, ns] : busy) r.engine_busy[name] = ns / core_ns;
  r.peak_bytes = plan::analyse_lifetimes(g, d).peak_bytes;
  r.vector_util = r.engine_busy.count(low.engines().vector) ? r.engine_busy[low.engines().vector] : 0;
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace hanpu::sim
