#include "plan/layout.h"

#include <algorithm>
#include <map>

#include "plan/lifetime.h"

namespace hanpu::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Layout kLayouts[] = {Layout::kDense, Layout::kBlocked};
uint8_t bit(Layout l) { return l == Layout::kDense ? 1 : 2; }

// The layout a tensor is stored in: inputs arrive dense, the incoming state in the state layout,
// everything else in the layout its producer writes.
Layout stored_layout(const Graph& g, const CostModel& cm, int t, int prod, const std::vector<Layout>& op_layout,
                     Layout state) {
  if (t == g.state_in) return state;
  if (prod < 0) return Layout::kDense;
  return cm.result_layout(g, prod, op_layout[prod]);
}

std::vector<int> unique_inputs(const OpNode& o) {
  std::vector<int> in = o.inputs;
  std::sort(in.begin(), in.end());
  in.erase(std::unique(in.begin(), in.end()), in.end());
  return in;
}

// Operator i reads its inputs in layout e: each input stored in the other layout is transformed once
// (later readers share the copy: `avail` holds the layouts each tensor exists in). Returns the transform
// cycles, and records the transforms when asked.
double read_inputs(const Graph& g, const CostModel& cm, int i, Layout e, const std::vector<int>& prod,
                   const std::vector<Layout>& op_layout, Layout state, std::vector<uint8_t>& avail,
                   std::vector<Transform>* record) {
  double cost = 0;
  for (int t : unique_inputs(g.ops[i])) {
    const Layout s = stored_layout(g, cm, t, prod[t], op_layout, state);
    avail[t] |= bit(s);
    if (!cm.reads_in_layout(g, i, t) || (avail[t] & bit(e))) continue;
    const double c = cm.transform_cost(g, t, s, e);
    if (record) record->push_back({t, s, e, i, c});
    cost += c;
    avail[t] |= bit(e);
  }
  return cost;
}

std::vector<int> producers(const Graph& g) {
  std::vector<int> prod(g.tensors.size());
  for (int t = 0; t < static_cast<int>(prod.size()); ++t) prod[t] = g.producer(t);
  return prod;
}

}  // namespace

bool DeviceCostModel::allowed(const Graph& g, int op, Layout l) const {
  const bool matrix = g.ops[op].engine == Engine::kMatrix;
  if (matrix && d_.matrix_requires_blocked && l == Layout::kDense) return false;
  if (!matrix && !d_.vector_allows_blocked && l == Layout::kBlocked) return false;
  return true;
}

double DeviceCostModel::op_cost(const Graph& g, int op, Layout l) const {
  const OpNode& o = g.ops[op];
  if (!allowed(g, op, l)) return kInf;
  if (o.engine == Engine::kMatrix) {
    // Tiles are whole: every GEMM dimension is padded to the device's block.
    auto pad = [&](int64_t x) { return static_cast<double>(padded(x, d_.block_rows)); };
    if (o.kind == OpKind::kSolve && d_.solve_macs_per_cycle > 0) return o.macs() / d_.solve_macs_per_cycle;
    double macs = o.kind == OpKind::kGemm ? pad(o.m) * pad(o.n) * pad(o.k) : o.macs();
    const bool transposed = o.trans_a || o.trans_b;  // only a transposed operand is read differently dense
    return macs / d_.matrix_macs_per_cycle * (l == Layout::kDense && transposed ? d_.matrix_dense_penalty : 1.0);
  }
  // The state update's decay on a device whose GEMM scales C's rows on their way in: part of K^T V''s pass.
  if (o.code == OpCode::kUpdate && d_.matrix_scales_accumulator) return 0;
  // Vector work runs at its result's working precision (fp32 for everything a chunk computes).
  const double bytes = o.vector_ops * elem_bytes(g, o.outputs[0], d_, d_.vector_mem);
  const double penalty = l == Layout::kBlocked && o.row_wise ? d_.vector_blocked_row_wise_penalty : 1.0;
  return d_.vector_cycles(bytes) * penalty + rows_cost(g, o);
}

double DeviceCostModel::rows_cost(const Graph& g, const OpNode& o) const {
  if (o.code == OpCode::kCumsum && d_.rows_load_bytes_per_cycle > 0) {
    return g.bytes_of(Role::kInput) / d_.rows_load_bytes_per_cycle;
  }
  if (o.code == OpCode::kO && d_.rows_store_bytes_per_cycle > 0) {
    return g.bytes_of(Role::kOutput) / d_.rows_store_bytes_per_cycle;
  }
  return 0;
}

double DeviceCostModel::transform_cost(const Graph& g, int t, Layout from, Layout to) const {
  if (from == to) return 0;
  const TensorNode& x = g.tensors[t];
  // Conversions the data movers make on the way (Device::load_converts etc.): a matrix result leaving the
  // result memory; a tensor the matrix unit gets from global memory (a graph input, or a hand-off another
  // kernel materialised); the output on its way to global memory.
  const int prod = g.producer(t);
  const bool matrix_result = prod >= 0 && g.ops[prod].engine == Engine::kMatrix;
  bool from_global = x.role == Role::kInput;
  for (int c : g.consumers(t)) from_global = from_global || (prod >= 0 && g.ops[c].kernel != g.ops[prod].kernel);
  if (d_.result_move_converts && matrix_result && from == Layout::kBlocked) return 0;
  if (d_.load_converts && from_global && to == Layout::kBlocked) return 0;
  if (d_.store_converts && x.role == Role::kOutput && to == Layout::kDense) return 0;
  const double bytes = static_cast<double>(padded(x.rows, d_.block_rows) * padded(x.cols, d_.block_cols)) *
                       elem_bytes(g, t, d_, d_.vector_mem);
  return d_.transform_fixed_cycles + 2 * bytes / d_.transform_bytes_per_cycle;  // read + write
}

LayoutPlan evaluate_plan(const Graph& g, const CostModel& cm, const std::vector<Layout>& op_layout,
                         Layout state_layout) {
  LayoutPlan p;
  p.op_layout = op_layout;
  p.state_layout = state_layout;
  const int nt = static_cast<int>(g.tensors.size());
  const std::vector<int> prod = producers(g);
  std::vector<uint8_t> avail(nt, 0);
  double cost = 0;
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const Layout e = op_layout[i];
    if (!cm.allowed(g, i, e)) return p;  // cost stays infinite
    cost += read_inputs(g, cm, i, e, prod, op_layout, state_layout, avail, &p.transforms);
    cost += cm.op_cost(g, i, e);
  }
  for (int t = 0; t < nt; ++t) {
    if (g.tensors[t].role != Role::kOutput) continue;
    const Layout s = stored_layout(g, cm, t, prod[t], op_layout, state_layout);
    if (s != Layout::kDense) {  // the caller reads outputs row-major
      const double c = cm.transform_cost(g, t, s, Layout::kDense);
      p.transforms.push_back({t, s, Layout::kDense, -1, c});
      cost += c;
    }
  }
  const Layout out = stored_layout(g, cm, g.state_out, prod[g.state_out], op_layout, state_layout);
  if (out != state_layout) {
    const double c = cm.transform_cost(g, g.state_out, out, state_layout);
    p.transforms.push_back({g.state_out, out, state_layout, -1, c});
    cost += c;
  }
  p.cost = cost;
  return p;
}

namespace {

// One DP step: a single operator or a merged vector chain [first, last].
struct Step {
  int first, last;
};

// Pruning (iii). A vector op is chainable when exactly one of its inputs has a variable layout (the others
// are graph inputs, always dense) and that input has the op's output shape. Consecutive chainable ops
// linked by a single-reader intermediate form one step. Then every transform a chain can need is of a
// tensor of one size (its head input, an interior tensor, or its output for later readers), and all-dense
// needs at most as many as any mixed assignment (a mixed one switches layout inside at least once), while
// its vector work is never dearer: so {all dense, all blocked} contains an optimum.
int variable_input(const Graph& g, const OpNode& o) {
  int var = -1;
  for (int t : unique_inputs(o)) {
    if (g.tensors[t].role == Role::kInput) continue;
    if (var >= 0) return -1;
    var = t;
  }
  return var;
}

bool chainable(const Graph& g, const OpNode& o) {
  if (o.engine != Engine::kVector || o.outputs.size() != 1) return false;
  const int v = variable_input(g, o);
  if (v < 0) return false;
  const TensorNode &in = g.tensors[v], &out = g.tensors[o.outputs[0]];
  return in.rows == out.rows && in.cols == out.cols;
}

std::vector<Step> make_steps(const Graph& g, bool chains) {
  std::vector<Step> steps;
  const int n = static_cast<int>(g.ops.size());
  for (int i = 0; i < n; ++i) {
    if (chains && !steps.empty()) {
      const OpNode &a = g.ops[steps.back().last], &b = g.ops[i];
      bool link = chainable(g, g.ops[steps.back().first]) && chainable(g, a) && chainable(g, b);
      if (link) {
        const int t = a.outputs[0];
        const std::vector<int> readers = g.consumers(t);
        link = variable_input(g, b) == t && readers.size() == 1 && readers[0] == i &&
               g.tensors[t].role == Role::kIntermediate;
      }
      if (link) {
        steps.back().last = i;
        continue;
      }
    }
    steps.push_back({i, i});
  }
  return steps;
}

// A DP state: (tensor, available-layout mask) for each live tensor, sorted by tensor.
using Key = std::vector<std::pair<int, uint8_t>>;

struct Entry {
  double cost = kInf;
  Key prev;
  Layout choice = Layout::kDense;
};

}  // namespace

LayoutPlan plan_layouts(const Graph& g, const CostModel& cm, const DpOptions& opt) {
  const int n = static_cast<int>(g.ops.size()), nt = static_cast<int>(g.tensors.size());
  const std::vector<Step> steps = make_steps(g, opt.chains);
  std::vector<int> prod(nt), last_read(nt, -1);
  for (int t = 0; t < nt; ++t) {
    prod[t] = g.producer(t);
    const std::vector<int> c = g.consumers(t);
    if (!c.empty()) last_read[t] = c.back();
  }
  // Operators whose layout is forced (a single allowed layout): the anchors of pruning (ii).
  std::vector<int> forced(n, -1);
  for (int i = 0; i < n; ++i) {
    const bool d = cm.allowed(g, i, Layout::kDense), b = cm.allowed(g, i, Layout::kBlocked);
    if (d != b) forced[i] = d ? 0 : 1;
  }
  // Pruning (ii): after step s, a tensor whose every later reader is forced has a fixed future: the
  // transforms to the layouts those readers want are paid then and the tensor leaves the DP state.
  // settle_after[t] is that step (-2: never), the same on every DP path.
  std::vector<int> settle_after(nt, -2);
  std::vector<uint8_t> settle_want(nt, 0);
  if (opt.anchors) {
    for (int t = 0; t < nt; ++t) {
      if (t == g.state_out || g.tensors[t].role == Role::kOutput || last_read[t] < 0) continue;
      for (std::size_t s = 0; s < steps.size(); ++s) {
        const bool present = prod[t] < 0 ? true : prod[t] <= steps[s].last;
        if (!present || steps[s].last >= last_read[t]) continue;
        bool all_forced = true;
        uint8_t want = 0;
        for (int c : g.consumers(t)) {
          if (c <= steps[s].last || !cm.reads_in_layout(g, c, t)) continue;  // read as stored: no transform
          if (forced[c] < 0) all_forced = false;
          want |= forced[c] == 1 ? 2 : 1;
        }
        // Only once the tensor has been touched (read or produced) by this step, so its mask is known.
        bool touched = prod[t] >= 0 && prod[t] <= steps[s].last;
        for (int c : g.consumers(t)) touched = touched || c <= steps[s].last;
        if (all_forced && touched) {
          settle_after[t] = static_cast<int>(s);
          settle_want[t] = want;
          break;
        }
      }
    }
  }
  auto other = [](Layout l) { return l == Layout::kDense ? Layout::kBlocked : Layout::kDense; };
  LayoutPlan best;
  int64_t visited = 0;
  for (Layout state : kLayouts) {
    std::vector<std::map<Key, Entry>> layers(steps.size() + 1);  // DP states after each step
    layers[0][Key{}] = Entry{0, {}, Layout::kDense};
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const Step st = steps[s];
      for (const auto& [key, entry] : layers[s]) {
        ++visited;
        for (Layout e : kLayouts) {
          bool ok = true;
          for (int i = st.first; i <= st.last; ++i) ok = ok && cm.allowed(g, i, e);
          if (!ok) continue;
          std::map<int, uint8_t> av(key.begin(), key.end());
          double cost = entry.cost;
          for (int i = st.first; i <= st.last; ++i) {
            for (int t : unique_inputs(g.ops[i])) {
              if (settle_after[t] >= 0 && settle_after[t] < static_cast<int>(s)) continue;  // paid when settled
              auto it = av.find(t);
              if (it == av.end()) {
                // First read of an input or of the state (anything produced earlier is in the state).
                const Layout stored = t == g.state_in ? state : prod[t] < 0 ? Layout::kDense : e;
                it = av.emplace(t, bit(stored)).first;
              }
              if (cm.reads_in_layout(g, i, t) && !(it->second & bit(e))) {
                cost += cm.transform_cost(g, t, other(e), e);
                it->second |= bit(e);
              }
            }
            for (int t : g.ops[i].outputs) av[t] = bit(cm.result_layout(g, i, e));
            cost += cm.op_cost(g, i, e);
          }
          Key next;
          for (const auto& [t, mask] : av) {
            if (settle_after[t] == static_cast<int>(s)) {
              for (Layout l : kLayouts) {
                if ((settle_want[t] & bit(l)) && !(mask & bit(l))) cost += cm.transform_cost(g, t, other(l), l);
              }
              continue;
            }
            const bool kept = t == g.state_out || g.tensors[t].role == Role::kOutput;  // needed at the end
            if (!kept && last_read[t] <= st.last) continue;  // no readers ahead
            next.emplace_back(t, mask);
          }
          Entry& slot = layers[s + 1][next];
          if (cost < slot.cost) slot = Entry{cost, key, e};
        }
      }
    }
    for (const auto& [key, entry] : layers.back()) {
      double cost = entry.cost;
      uint8_t mask = 0;
      for (const auto& [t, m] : key) {
        if (t == g.state_out) mask = m;
        if (g.tensors[t].role == Role::kOutput && !(m & bit(Layout::kDense))) {
          cost += cm.transform_cost(g, t, Layout::kBlocked, Layout::kDense);  // delivered row-major
        }
      }
      if (!(mask & bit(state))) cost += cm.transform_cost(g, g.state_out, other(state), state);  // back to the state layout
      if (cost < best.cost) {
        std::vector<Layout> layout(n, Layout::kDense);
        Key k = key;
        for (std::size_t s = steps.size(); s-- > 0;) {
          const Entry& en = layers[s + 1].at(k);
          for (int i = steps[s].first; i <= steps[s].last; ++i) layout[i] = en.choice;
          k = en.prev;
        }
        best = evaluate_plan(g, cm, layout, state);
        best.cost = cost;
      }
    }
  }
  best.dp_states = visited;
  return best;
}

LayoutPlan plan_layouts_exhaustive(const Graph& g, const CostModel& cm) {
  const int n = static_cast<int>(g.ops.size());
  LayoutPlan best;
  std::vector<Layout> layout(n, Layout::kDense);
  // rest[i]: the cheapest the operators i.. can possibly cost (each in its cheaper allowed layout, no
  // transforms): an admissible bound on what remains.
  std::vector<double> rest(n + 1, 0);
  for (int i = n - 1; i >= 0; --i) {
    double m = kInf;
    for (Layout l : kLayouts) {
      if (cm.allowed(g, i, l)) m = std::min(m, cm.op_cost(g, i, l));
    }
    rest[i] = rest[i + 1] + m;
  }
  for (Layout state : kLayouts) {
    // Depth-first over operators; the partial cost (operators so far and the transforms they needed) plus
    // the bound on the rest never decreases along a branch, so a branch at or above the best complete
    // cost is cut. Every assignment is either evaluated or provably no better.
    const std::vector<int> prod = producers(g);
    std::vector<uint8_t> avail(g.tensors.size(), 0);
    auto rec = [&](auto&& self, int i, double partial) -> void {
      if (partial + rest[i] >= best.cost) return;
      if (i == n) {
        const LayoutPlan p = evaluate_plan(g, cm, layout, state);
        if (p.cost < best.cost) best = p;
        return;
      }
      for (Layout e : kLayouts) {
        if (!cm.allowed(g, i, e)) continue;
        layout[i] = e;
        const std::vector<uint8_t> saved = avail;
        const double c = partial + read_inputs(g, cm, i, e, prod, layout, state, avail, nullptr) + cm.op_cost(g, i, e);
        self(self, i + 1, c);
        avail = saved;
      }
    };
    rec(rec, 0, 0.0);
  }
  return best;
}

LayoutPlan fixed_layouts(const Graph& g, const CostModel& cm) {
  std::vector<Layout> layout(g.ops.size(), Layout::kDense);
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    if (!cm.allowed(g, i, Layout::kDense)) layout[i] = Layout::kBlocked;
  }
  return evaluate_plan(g, cm, layout, Layout::kDense);
}

}  // namespace hanpu::plan
