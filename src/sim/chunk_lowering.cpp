#include "sim/chunk_lowering.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace hanpu::sim {

using Queue = ChunkSink::Queue;

double L0Residency::load_bytes(const plan::Graph& g, const plan::Device& d, const plan::OpNode& o) {
  auto size = [&](int t) { return static_cast<double>(g.tensors[t].rows * g.tensors[t].cols * d.operand_bytes); };
  const plan::Memory* ma = d.memory(d.matrix_left_mem);
  const plan::Memory* mb = d.memory(d.matrix_right_mem);
  const double a = size(o.inputs[0]), b = o.inputs.size() > 1 ? size(o.inputs[1]) : 0;
  if (ma == nullptr || mb == nullptr) return a + b;  // no operand buffers described: every operand loaded
  const double cap_a = static_cast<double>(ma->bytes), cap_b = static_cast<double>(mb->bytes);
  const Slot want_a{o.inputs[0], o.trans_a};
  const Slot want_b{o.inputs.size() > 1 ? o.inputs[1] : -1, o.trans_b};
  double bytes = (left == want_a ? 0 : a) + (right == want_b || want_b.tensor < 0 ? 0 : b);
  // Neither operand fits its buffer: the right one streams through again for every further left tile.
  if (a > cap_a && b > cap_b) bytes += b * (std::ceil(a / cap_a) - 1);
  // What stays: an operand within half its buffer (the other half takes the next load: L0 ping-pong).
  left = a <= cap_a / 2 ? want_a : Slot{};
  right = want_b.tensor >= 0 && b <= cap_b / 2 ? want_b : Slot{};
  return bytes;
}

int ChunkLowering::to_operand_memory(ChunkSink& em, int core, int t, int ready, bool loaded, int gate) const {
  const int op = d_.operand_bytes;
  // A loaded tensor arrives at its stored size, one made on chip at its vector-memory size.
  const bool cast = loaded ? plan::elem_bytes(g_, t, d_, d_.materialised_mem) > op : plan::needs_cast(g_, t, d_);
  const bool separate = d_.matrix_operand_mem != d_.vector_mem;
  if (!cast && (loaded || !separate)) return ready;
  std::vector<int> deps;
  if (ready >= 0) deps.push_back(ready);
  if (gate >= 0) deps.push_back(gate);
  const double elems = static_cast<double>(g_.tensors[t].rows * g_.tensors[t].cols);
  int last = ready;
  if (cast) {
    const double cycles = d_.vector_cycles(elems * plan::elem_bytes(g_, t, d_, d_.vector_mem));
    last = em.compute(core, Queue::kVector, cycles, deps, "cast " + g_.tensors[t].name);
    em.counts.cast += elems;
    deps = {last};
  }
  if (separate) {
    last = em.move(core, Queue::kForward, elems * op, deps, "forward " + g_.tensors[t].name);
    em.counts.forward += elems * op;
  }
  return last;
}

void ChunkLowering::chunk(ChunkSink& em, int core, KernelMask mask, std::map<int, int>& have, int gate,
                          bool store_handoffs) const {
  const int n = static_cast<int>(g_.ops.size());
  auto in_mask = [&](int kernel) { return (mask >> kernel) & 1u; };
  auto after = [](int a, int b) {
    std::vector<int> deps;
    if (a >= 0) deps.push_back(a);
    if (b >= 0) deps.push_back(b);
    return deps;
  };
  std::set<int> loaded;  // tensors this chunk loaded from global memory (spill reloads: `operand` below)
  const int chunk_begin = em.next_id();
  const int slot = em.chunk_end_before(core, d_.load_slots);
  const plan::Memory* vm = d_.memory(d_.vector_mem);
  const auto peak = spills_.peak_bytes.find(d_.vector_mem);
  const bool overlap_fits = vm == nullptr || peak == spills_.peak_bytes.end() || 2 * peak->second <= vm->bytes;
  const int previous = overlap_fits ? -1 : em.chunk_end_before(core, 1);
  // Work (loads aside) waits for the launch or barrier and, without room for two chunks, the previous chunk.
  auto gated = [&](std::vector<int> deps) {
    if (gate >= 0) deps.push_back(gate);
    if (previous >= 0) deps.push_back(previous);
    return deps;
  };
  int step = -1;
  std::map<std::pair<int, int>, int> made;  // (tensor, step) -> the task that made it available at that step
  if (have.count(g_.state_in) && have[g_.state_in] >= 0) made[{g_.state_in, 0}] = have[g_.state_in];
  auto dep = [&](int t) -> int {
    auto it = have.find(t);
    if (it != have.end()) return it->second;
    loaded.insert(t);
    have[t] = em.move(core, Queue::kLoad, static_cast<double>(bytes(t)), after(gate, slot), g_.tensors[t].name);
    return made[{t, step}] = have[t];
  };
  std::map<int, int> operand;  // tensor -> the task that put it in the matrix unit's operand memory
  L0Residency l0;
  // Spill moves: stores after step s, reloads before step s (s = -1: chunk start, n: chunk end).
  std::map<int, int> stored;  // tensor -> its spill store
  auto spill_stores = [&](int step) {
    for (const SpillMove& m : spills_.moves) {
      if (m.after_step != step || !in_mask(m.kernel) || !m.store) continue;
      const auto it = have.find(m.tensor);
      if (it == have.end() || it->second < 0) continue;  // a zero state: nothing to keep
      stored[m.tensor] =
          em.move(core, Queue::kStore, static_cast<double>(m.bytes), {it->second}, "spill " + g_.tensors[m.tensor].name);
      em.counts.spill += static_cast<double>(m.bytes);
      em.counts.spill_store += static_cast<double>(m.bytes);
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
      have[m.tensor] =
          em.move(core, Queue::kLoad, static_cast<double>(m.bytes), gated(deps), "reload " + g_.tensors[m.tensor].name);
      made[{m.tensor, step}] = have[m.tensor];
      // A reload into the operand memory puts it there; one into the vector memory needs forwarding again.
      if (m.memory == d_.matrix_operand_mem && m.memory != d_.vector_mem) operand[m.tensor] = have[m.tensor];
      else operand.erase(m.tensor);
      em.counts.spill += static_cast<double>(m.bytes);
    }
  };
  std::vector<std::pair<int, int>> range(n, {-1, -1});  // task ids emitted for each step
  std::vector<int> work_first(n, -1), l0_first(n, -1);   // each step's first task past its loads; its L1 -> L0 move
  spill_stores(-1);
  for (int i = 0; i < n; ++i) {
    const plan::OpNode& o = g_.ops[i];
    if (!in_mask(o.kernel)) continue;
    const int begin = em.next_id();
    step = i;
    spill_reloads(i);
    std::vector<int> deps = gated({});
    const bool matrix = o.engine == plan::Engine::kMatrix;
    for (int t : o.inputs) {
      int p = dep(t);
      if (matrix) {
        if (!operand.count(t)) operand[t] = to_operand_memory(em, core, t, p, loaded.count(t) > 0, gate);
        p = operand[t];
      }
      if (p >= 0) deps.push_back(p);
    }
    work_first[i] = em.next_id();
    for (const plan::Transform& tr : pl_.layouts.transforms) {
      if (tr.before_op != i || tr.cost <= 0) continue;  // free: a data mover converts on the way
      deps.push_back(em.compute(core, Queue::kVector, tr.cost, deps, "transform " + g_.tensors[tr.tensor].name));
    }
    const double cycles = cm_.op_cost(g_, i, pl_.layouts.op_layout[i]);
    int last;
    if (o.engine == plan::Engine::kMatrix) {
      const double in_bytes = l0.load_bytes(g_, d_, o);
      const int ld = em.move(core, Queue::kMatrixLoad, in_bytes, deps, "operands " + o.name);
      l0_first[i] = ld;
      em.counts.l1_to_l0 += in_bytes;
      em.counts.macs += o.macs();
      em.counts.executed_macs += o.executed_macs(d_.block_rows, d_.block_cols);
      const int mm = em.compute(core, Queue::kMatrix, cycles, {ld}, o.name);
      const double out_bytes = static_cast<double>(plan::tensor_bytes(g_, o.outputs[0], d_, d_.matrix_result_mem));
      em.counts.l0c_to_ub += out_bytes;
      last = em.move(core, Queue::kMatrixOut, out_bytes, {mm}, "result " + o.name);
    } else {
      last = em.compute(core, Queue::kVector, cycles, deps, o.name);
    }
    for (int t : o.outputs) {
      have[t] = last;
      made[{t, i}] = last;
      operand.erase(t);  // written (the state in place): an earlier operand copy is stale
      l0.forget(t);
      if (t == out_t_ || (store_handoffs && read_outside(t, mask))) {
        // S' handed to another kernel is the next chunk's h[c], stored as S is (plan/lifetime.h).
        const int stored_as = t == g_.state_out ? g_.state_in : t;
        em.move(core, Queue::kStore, static_cast<double>(bytes(stored_as)), {last}, g_.tensors[t].name);
      }
    }
    spill_stores(i);
    range[i] = {begin, em.next_id() - 1};
  }
  spill_reloads(n);
  for (const plan::Transform& tr : pl_.layouts.transforms) {
    if (tr.before_op < 0 && tr.cost > 0 && have.count(tr.tensor)) {
      have[tr.tensor] =
          em.compute(core, Queue::kVector, tr.cost, {have[tr.tensor]}, "transform " + g_.tensors[tr.tensor].name);
    }
  }
  // Occupancy: each presence from the task that made the tensor available at its first step (its load,
  // reload or producing task; else that step's first task past its loads) to the last task of its last
  // step; in the matrix unit's per-step buffers from the step's L1 -> L0 move. The slots held for later
  // chunks' loads are those chunks' own presences. The state is one buffer carried from chunk to chunk:
  // S' is counted as the next chunk's S (from its production, or, updated in place, from that chunk's work).
  const bool in_place = plan::state_updated_in_place(g_);
  for (const plan::Residency& p : spills_.presence) {
    if (!in_mask(p.kernel) || p.prefetch) continue;
    if (p.tensor == g_.state_out && p.memory == d_.state_mem) continue;
    const bool per_step =
        p.memory == d_.matrix_left_mem || p.memory == d_.matrix_right_mem || p.memory == d_.matrix_result_mem;
    int first = -1, last = -1;
    for (int s = std::max(0, p.from); s <= std::min(n - 1, p.to); ++s) {
      if (range[s].first < 0) continue;
      if (first < 0) first = per_step && l0_first[s] >= 0 ? l0_first[s] : work_first[s];
      last = range[s].second;
    }
    const auto m = made.find({p.tensor, p.from});
    const bool carried_in_place = p.tensor == g_.state_in && in_place;
    if (!per_step && !carried_in_place && m != made.end() && m->second >= 0) first = m->second;
    if (first >= 0 && first <= last) em.occupy(core, p.memory, p.bytes, first, last);
  }
  // The chunk ends when every one of its tasks has (the last emitted need not finish last).
  if (em.next_id() > chunk_begin) {
    std::vector<int> all;
    for (int id = chunk_begin; id < em.next_id(); ++id) all.push_back(id);
    const int joined = em.join(core, std::move(all));
    em.chunk_end(core, joined >= 0 ? joined : em.next_id() - 1);
  }
}

Status make_lowering(const plan::Plan& pl, const plan::Device& d, std::unique_ptr<ChunkLowering>* out) {
  SpillPlan sp;
  HANPU_RETURN_IF_ERROR(plan_spills(pl.graph, d, &sp));
  if (!sp.moves.empty() && d.load_slots > 1) {
    plan::Device single = d;
    single.load_slots = 1;
    SpillPlan one;
    if (plan_spills(pl.graph, single, &one).ok() && one.moves.empty()) {
      *out = std::make_unique<ChunkLowering>(pl, single, std::move(one));
      return Status::Ok();
    }
  }
  *out = std::make_unique<ChunkLowering>(pl, d, std::move(sp));
  return Status::Ok();
}

}  // namespace hanpu::sim
