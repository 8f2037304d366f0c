#include "plan/lifetime.h"

#include <algorithm>
#include <set>

namespace hanpu::plan {

int elem_bytes(const Graph& g, int t, const Device& d, const std::string& memory) {
  const TensorNode& x = g.tensors[t];
  const int op = d.operand_bytes;
  const bool shared = memory == d.vector_mem || memory == d.state_mem;
  const bool matrix_only = memory == d.matrix_operand_mem || memory == d.matrix_left_mem || memory == d.matrix_right_mem;
  if (matrix_only && !shared) return op;
  const Memory* m = d.memory(memory);
  const bool on_chip = m != nullptr && m->on_chip;
  const bool gate = x.value == Value::kGate || x.value == Value::kG || x.value == Value::kEG ||
                    x.value == Value::kEGl || x.value == Value::kEGlast;
  switch (x.role) {
    case Role::kStateIn:
      // Off chip, the state a later kernel reads per chunk (FLA's h[c]) is stored at the model's precision.
      if (!on_chip && g.state_out >= 0 && g.producer(g.state_out) >= 0) {
        const int update_kernel = g.ops[g.producer(g.state_out)].kernel;
        for (int c : g.consumers(t)) {
          if (g.ops[c].kernel != update_kernel) return op;
        }
      }
      return 4;
    case Role::kStateOut: return 4;
    case Role::kInput: return gate ? 4 : op;
    case Role::kOutput: return on_chip ? 4 : op;
    default: break;
  }
  return on_chip || gate ? 4 : op;
}

int64_t tensor_bytes(const Graph& g, int t, const Device& d, const std::string& memory) {
  return g.tensors[t].rows * g.tensors[t].cols * elem_bytes(g, t, d, memory);
}

int64_t tensor_bytes(const Graph& g, int t, const Device& d) { return tensor_bytes(g, t, d, d.materialised_mem); }

bool needs_cast(const Graph& g, int t, const Device& d) {
  return elem_bytes(g, t, d, d.vector_mem) > d.operand_bytes;
}

bool state_updated_in_place(const Graph& g) {
  const std::vector<int> readers = g.consumers(g.state_in);
  const int update = g.producer(g.state_out);
  return update >= 0 && !readers.empty() && update == readers.back();
}

std::vector<Residency> residencies(const Graph& g, const Device& d) {
  const int n = static_cast<int>(g.ops.size());
  std::vector<Residency> out;
  std::map<int, std::pair<int, int>> kernel_steps;  // kernel -> its first and last step
  for (int i = 0; i < n; ++i) {
    auto [it, fresh] = kernel_steps.try_emplace(g.ops[i].kernel, i, i);
    if (!fresh) it->second.second = i;
  }
  auto add = [&](int t, const std::string& mem, int kernel, int from, int to, std::vector<int> uses) {
    const Memory* m = d.memory(mem);
    if (m == nullptr || !m->on_chip || from > to) return;
    std::sort(uses.begin(), uses.end());
    uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
    // What this kernel loads from global memory (inputs, tensors another kernel materialised) is
    // double-buffered in the memories loads land in.
    const int prod = g.producer(t);
    const bool loaded = g.tensors[t].role == Role::kInput || (prod >= 0 && g.ops[prod].kernel != kernel);
    const bool landing = mem == d.vector_mem || mem == d.matrix_operand_mem;
    const int64_t bytes = tensor_bytes(g, t, d, mem);
    out.push_back({t, mem, kernel, from, to, bytes, std::move(uses)});
    if (loaded && landing && d.load_slots > 1) {
      const auto [first, last] = kernel_steps[kernel];
      out.push_back({t, mem, kernel, first, last, bytes * (d.load_slots - 1), {}, true});
    }
  };
  // The state lives in the kernel that updates it (the recurrence): S from that kernel's start to its last
  // read there, S' to that kernel's end. Other kernels reading S (FLA's output kernel, h[c]) load it.
  const int update = g.state_out >= 0 ? g.producer(g.state_out) : -1;
  const int state_kernel = update >= 0 ? g.ops[update].kernel : 0;
  int s_last_read = -1;
  for (int c : g.consumers(g.state_in)) s_last_read = g.ops[c].kernel == state_kernel ? c : s_last_read;
  const bool in_place = state_updated_in_place(g);
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    const TensorNode& x = g.tensors[t];
    const int prod = g.producer(t);
    const std::vector<int> cons = g.consumers(t);
    const bool state = x.role == Role::kStateIn || x.role == Role::kStateOut;
    if (x.role == Role::kStateIn) {
      std::vector<int> uses;
      for (int c : cons) {
        if (g.ops[c].kernel == state_kernel) uses.push_back(c);
      }
      uses.push_back(-1);
      add(t, d.state_mem, state_kernel, kernel_steps[state_kernel].first, s_last_read, uses);
    }
    // In place: S' takes over S's buffer, which S holds up to the update step.
    if (x.role == Role::kStateOut) {
      std::vector<int> uses = cons;
      uses.push_back(prod);
      uses.push_back(n);
      add(t, d.state_mem, state_kernel, in_place ? prod + 1 : prod, kernel_steps[state_kernel].second, uses);
    }
    if (prod >= 0 && g.ops[prod].engine == Engine::kMatrix) {
      add(t, d.matrix_result_mem, g.ops[prod].kernel, prod, prod, {prod});
    }
    // Operands pass through the matrix unit's left / right buffers at the step that reads them.
    for (int c : cons) {
      const OpNode& o = g.ops[c];
      if (o.engine != Engine::kMatrix) continue;
      const std::string& mem = o.inputs[0] == t ? d.matrix_left_mem : d.matrix_right_mem;
      if (!mem.empty()) add(t, mem, o.kernel, c, c, {c});
    }
    // On-chip residency per memory, within each kernel.
    std::map<std::pair<std::string, int>, std::vector<int>> span;  // (memory, kernel) -> steps
    for (int c : cons) {
      const std::string& mem = g.ops[c].engine == Engine::kMatrix ? d.matrix_operand_mem : d.vector_mem;
      span[{mem, g.ops[c].kernel}].push_back(c);
    }
    if (prod >= 0 && g.ops[prod].engine == Engine::kVector && !state) {
      span[{d.vector_mem, g.ops[prod].kernel}].push_back(prod);
    }
    for (auto& [key, uses] : span) {
      if (state && key.first == d.state_mem && key.second == state_kernel) continue;  // its own residency, above
      // A tensor moves into a memory at its producer's step when produced by the same kernel.
      if (prod >= 0 && g.ops[prod].kernel == key.second) uses.push_back(prod);
      const auto [lo, hi] = std::minmax_element(uses.begin(), uses.end());
      const int from = *lo, to = *hi;
      add(t, key.first, key.second, from, to, uses);
    }
  }
  return out;
}

std::map<std::string, std::vector<int64_t>> live_bytes(const Graph& g, const Device& d,
                                                       const std::vector<Residency>& rs) {
  const int n = static_cast<int>(g.ops.size());
  std::map<std::string, std::vector<int64_t>> live;
  for (const Memory& m : d.memories) {
    if (m.on_chip) live[m.name].assign(n, m.name == d.vector_mem ? d.vector_scratch_bytes : 0);
  }
  // A kernel's residencies occupy its memories only while it runs (its own steps).
  for (const Residency& r : rs) {
    std::vector<int64_t>& steps = live.at(r.memory);
    for (int s = std::max(0, r.from); s <= std::min(n - 1, r.to); ++s) steps[s] += g.ops[s].kernel == r.kernel ? r.bytes : 0;
  }
  return live;
}

LifetimeReport analyse_lifetimes(const Graph& g, const Device& d) {
  LifetimeReport rep;
  rep.state_in_place = state_updated_in_place(g);
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    // Materialised between kernels: written once, read once by each other kernel.
    const int prod = g.producer(t);
    std::set<int> other_kernels;
    for (int c : g.consumers(t)) {
      if (prod >= 0 && g.ops[c].kernel != g.ops[prod].kernel) other_kernels.insert(g.ops[c].kernel);
    }
    if (!other_kernels.empty()) {
      const int64_t bytes = tensor_bytes(g, t, d);
      rep.materialised_bytes += bytes;
      rep.materialised_traffic_bytes += bytes * (1 + static_cast<int64_t>(other_kernels.size()));
    }
  }
  for (const auto& [mem, steps] : live_bytes(g, d, residencies(g, d))) {
    const auto it = std::max_element(steps.begin(), steps.end());
    rep.peak_bytes[mem] = it == steps.end() ? 0 : *it;
    rep.peak_step[mem] = it == steps.end() ? 0 : static_cast<int>(it - steps.begin());
  }
  return rep;
}

}  // namespace hanpu::plan
