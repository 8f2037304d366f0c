#include "plan/lifetime.h"

#include <algorithm>
#include <set>

namespace hanpu::plan {

int64_t tensor_bytes(const Graph& g, int t, const Device& d) {
  const TensorNode& x = g.tensors[t];
  const bool state = x.role == Role::kStateIn || x.role == Role::kStateOut;
  return x.rows * x.cols * (state ? 4 : d.operand_bytes);
}

LifetimeReport analyse_lifetimes(const Graph& g, const Device& d) {
  const int n = static_cast<int>(g.ops.size());
  LifetimeReport rep;
  // live[memory][step] = bytes present
  std::map<std::string, std::vector<int64_t>> live;
  for (const Memory& m : d.memories) {
    if (m.on_chip) live[m.name].assign(n, 0);
  }
  auto add = [&](const std::string& mem, int from, int to, int64_t bytes) {
    auto it = live.find(mem);
    if (it == live.end()) return;  // off-chip
    for (int s = std::max(0, from); s <= std::min(n - 1, to); ++s) it->second[s] += bytes;
  };
  const std::vector<int> sreaders = g.consumers(g.state_in);
  const int s_last_read = sreaders.empty() ? -1 : sreaders.back();
  const int s_update = g.producer(g.state_out);
  rep.state_in_place = s_update >= 0 && s_update == s_last_read;
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    const TensorNode& x = g.tensors[t];
    const int64_t bytes = tensor_bytes(g, t, d);
    const int prod = g.producer(t);
    const std::vector<int> cons = g.consumers(t);
    const bool state = x.role == Role::kStateIn || x.role == Role::kStateOut;
    if (x.role == Role::kStateIn) add(d.state_mem, 0, s_last_read, bytes);
    // In place: S' takes over S's buffer, already counted up to the update step.
    if (x.role == Role::kStateOut) add(d.state_mem, rep.state_in_place ? prod + 1 : prod, n - 1, bytes);
    if (prod >= 0 && g.ops[prod].engine == Engine::kMatrix) add(d.matrix_result_mem, prod, prod, bytes);
    // Materialised between kernels: written once, read once by each other kernel.
    std::set<int> other_kernels;
    for (int c : cons) {
      if (prod >= 0 && g.ops[c].kernel != g.ops[prod].kernel) other_kernels.insert(g.ops[c].kernel);
    }
    if (!other_kernels.empty()) {
      rep.materialised_bytes += bytes;
      rep.materialised_traffic_bytes += bytes * (1 + static_cast<int64_t>(other_kernels.size()));
    }
    // On-chip residency per memory, within each kernel.
    std::map<std::pair<std::string, int>, std::pair<int, int>> span;  // (memory, kernel) -> [first, last]
    auto need = [&](const std::string& mem, int kernel, int step) {
      auto [it, fresh] = span.try_emplace({mem, kernel}, step, step);
      if (!fresh) {
        it->second.first = std::min(it->second.first, step);
        it->second.second = std::max(it->second.second, step);
      }
    };
    for (int c : cons) {
      const std::string& mem = g.ops[c].engine == Engine::kMatrix ? d.matrix_operand_mem : d.vector_mem;
      need(mem, g.ops[c].kernel, c);
    }
    if (prod >= 0 && g.ops[prod].engine == Engine::kVector && !state) need(d.vector_mem, g.ops[prod].kernel, prod);
    for (const auto& [key, se] : span) {
      if (state && key.first == d.state_mem) continue;  // counted above
      int from = se.first;
      // A tensor moves into a memory at its producer's step when produced by the same kernel.
      if (prod >= 0 && g.ops[prod].kernel == key.second) from = std::min(from, prod);
      add(key.first, from, se.second, bytes);
    }
  }
  for (const auto& [mem, steps] : live) {
    const auto it = std::max_element(steps.begin(), steps.end());
    rep.peak_bytes[mem] = it == steps.end() ? 0 : *it;
    rep.peak_step[mem] = it == steps.end() ? 0 : static_cast<int>(it - steps.begin());
  }
  return rep;
}

}  // namespace hanpu::plan
