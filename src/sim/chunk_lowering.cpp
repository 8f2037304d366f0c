#include "sim/chunk_lowering.h"

#include <algorithm>

namespace hanpu::sim {

using Queue = ChunkSink::Queue;

void ChunkLowering::chunk(ChunkSink& em, int core, KernelMask mask, std::map<int, int>& have, int gate,
                          bool store_handoffs) const {
  const int n = static_cast<int>(g_.ops.size());
  auto in_mask = [&](int kernel) { return (mask >> kernel) & 1u; };
  auto gated = [&](std::vector<int> deps) {
    if (gate >= 0) deps.push_back(gate);
    return deps;
  };
  auto dep = [&](int t) -> int {
    auto it = have.find(t);
    if (it != have.end()) return it->second;
    return have[t] = em.move(core, Queue::kLoad, static_cast<double>(bytes(t)), gated({}), g_.tensors[t].name);
  };
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
      em.counts.spill += static_cast<double>(m.bytes);
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
      deps.push_back(em.compute(core, Queue::kVector, tr.cost, deps, "transform " + g_.tensors[tr.tensor].name));
    }
    const double cycles = cm_.op_cost(g_, i, pl_.layouts.op_layout[i]);
    int last;
    if (o.engine == plan::Engine::kMatrix) {
      const int ld = em.move(core, Queue::kMatrixLoad, in_bytes, deps, "operands " + o.name);
      em.counts.l1_to_l0 += in_bytes;
      em.counts.macs += o.macs();
      em.counts.executed_macs += o.executed_macs(d_.block_rows, d_.block_cols);
      const int mm = em.compute(core, Queue::kMatrix, cycles, {ld}, o.name);
      const double out_bytes = static_cast<double>(bytes(o.outputs[0]));
      em.counts.l0c_to_ub += out_bytes;
      last = em.move(core, Queue::kMatrixOut, out_bytes, {mm}, "result " + o.name);
    } else {
      last = em.compute(core, Queue::kVector, cycles, deps, o.name);
    }
    for (int t : o.outputs) {
      have[t] = last;
      if (t == out_t_ || (store_handoffs && read_outside(t, mask))) {
        em.move(core, Queue::kStore, static_cast<double>(bytes(t)), {last}, g_.tensors[t].name);
      }
    }
    spill_stores(i);
    range[i] = {begin, em.next_id() - 1};
  }
  spill_reloads(n);
  for (const plan::Transform& tr : pl_.layouts.transforms) {
    if (tr.before_op < 0 && have.count(tr.tensor)) {
      have[tr.tensor] =
          em.compute(core, Queue::kVector, tr.cost, {have[tr.tensor]}, "transform " + g_.tensors[tr.tensor].name);
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
    if (first >= 0) em.occupy(core, p.memory, p.bytes, first, last);
  }
}

Status make_lowering(const plan::Plan& pl, const plan::Device& d, std::unique_ptr<ChunkLowering>* out) {
  SpillPlan sp;
  HANPU_RETURN_IF_ERROR(plan_spills(pl.graph, d, &sp));
  *out = std::make_unique<ChunkLowering>(pl, d, std::move(sp));
  return Status::Ok();
}

}  // namespace hanpu::sim
