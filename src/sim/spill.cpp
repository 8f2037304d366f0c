#include "sim/spill.h"

#include <algorithm>
#include <set>

#include "plan/lifetime.h"

namespace hanpu::sim {

namespace {

// A residency with the step ranges it has been moved out for.
struct Piece {
  plan::Residency r;
  std::vector<std::pair<int, int>> gaps;  // absent over [first, second]
  bool present(int s) const {
    if (s < r.from || s > r.to) return false;
    for (const auto& [a, b] : gaps) {
      if (s >= a && s <= b) return false;
    }
    return true;
  }
};

}  // namespace

Status plan_spills(const plan::Graph& g, const plan::Device& d, SpillPlan* out) {
  const int n = static_cast<int>(g.ops.size());
  std::vector<Piece> pieces;
  for (plan::Residency& r : plan::residencies(g, d)) pieces.push_back({std::move(r), {}});
  SpillPlan plan;
  std::set<int> stored;  // tensors already given a global-memory copy
  for (const plan::Memory& m : d.memories) {
    if (!m.on_chip) continue;
    int64_t peak = 0;
    const int64_t reserved = m.name == d.vector_mem ? d.vector_scratch_bytes : 0;
    for (int s = 0; s < n; ++s) {
      int64_t live = reserved;
      for (const Piece& p : pieces) live += p.r.memory == m.name && p.present(s) ? p.r.bytes : 0;
      while (live > m.bytes) {
        // The evictable piece whose next use is furthest away.
        Piece* best = nullptr;
        int best_next = 0;
        for (Piece& p : pieces) {
          if (p.r.memory != m.name || !p.present(s)) continue;
          const auto next = std::upper_bound(p.r.uses.begin(), p.r.uses.end(), s);
          if (next == p.r.uses.end() || (next != p.r.uses.begin() && *(next - 1) == s)) continue;  // used now
          const bool better = best == nullptr || *next > best_next ||
                              (*next == best_next && (p.r.bytes > best->r.bytes ||
                                                      (p.r.bytes == best->r.bytes && p.r.tensor < best->r.tensor)));
          if (better) {
            best = &p;
            best_next = *next;
          }
        }
        if (best == nullptr) {
          return InvalidArgument("op '" + g.ops[s].name + "' (step " + std::to_string(s) + ") needs " +
                                 std::to_string(live) + " bytes of " + m.name + ", more than its capacity of " +
                                 std::to_string(m.bytes) + " bytes; the model does not split operators into tiles");
        }
        const plan::Residency& r = best->r;
        const int prev = *(std::upper_bound(r.uses.begin(), r.uses.end(), s) - 1);
        best->gaps.emplace_back(std::max(prev + 1, r.from), best_next - 1);
        const int prod = g.producer(r.tensor);
        const plan::Role role = g.tensors[r.tensor].role;
        const bool on_chip_only = role == plan::Role::kStateIn || role == plan::Role::kStateOut ||
                                  (prod >= 0 && g.ops[prod].kernel == r.kernel);
        const bool store = on_chip_only && stored.insert(r.tensor).second;
        plan.moves.push_back({r.tensor, m.name, r.kernel, r.bytes, prev, best_next, store});
        plan.store_bytes += store ? r.bytes : 0;
        plan.reload_bytes += r.bytes;
        live -= r.bytes;
      }
      peak = std::max(peak, live);
    }
    plan.peak_bytes[m.name] = peak;
  }
  for (Piece& p : pieces) {
    std::sort(p.gaps.begin(), p.gaps.end());
    int from = p.r.from;
    auto emit = [&](int to) {
      if (from > to) return;
      plan::Residency piece = p.r;
      piece.from = from;
      piece.to = to;
      std::erase_if(piece.uses, [&](int u) { return u < from || u > to; });
      plan.presence.push_back(std::move(piece));
    };
    for (const auto& [a, b] : p.gaps) {
      emit(a - 1);
      from = b + 1;
    }
    emit(p.r.to);
  }
  *out = std::move(plan);
  return Status::Ok();
}

}  // namespace hanpu::sim
