#include "sim/spill.h"

#include <algorithm>
#include <map>
#include <set>

#include "plan/lifetime.h"

namespace hanpu::sim {

namespace {

// A residency with the step ranges it has been moved out for, and the steps it streams through in tiles.
struct Piece {
  plan::Residency r;
  std::vector<std::pair<int, int>> gaps;  // absent over [first, second]
  std::map<int, int64_t> partial;         // step -> bytes present while that step runs in tiles
  bool present(int s) const {
    if (s < r.from || s > r.to) return false;
    for (const auto& [a, b] : gaps) {
      if (s >= a && s <= b) return false;
    }
    return true;
  }
  int64_t bytes_at(int s) const {
    const auto it = partial.find(s);
    return it != partial.end() ? it->second : present(s) ? r.bytes : 0;
  }
  bool in(const std::string& memory, int kernel) const { return r.memory == memory && r.kernel == kernel; }
  bool used_at(int s) const { return std::binary_search(r.uses.begin(), r.uses.end(), s); }
};

class Planner {
 public:
  Planner(const plan::Graph& g, const plan::Device& d) : g_(g), d_(d) {
    for (plan::Residency& r : plan::residencies(g, d)) pieces_.push_back({std::move(r), {}, {}});
  }

  Status run(SpillPlan* out) {
    const int n = static_cast<int>(g_.ops.size());
    for (const plan::Memory& m : d_.memories) {
      if (!m.on_chip) continue;
      int64_t peak = 0;
      const int64_t reserved = m.name == d_.vector_mem ? d_.vector_scratch_bytes : 0;
      for (int s = 0; s < n; ++s) {
        // Only the running kernel's pieces occupy the memory (plan/lifetime.h).
        auto live_now = [&] {
          int64_t b = reserved;
          for (const Piece& p : pieces_) b += p.in(m.name, g_.ops[s].kernel) ? p.bytes_at(s) : 0;
          return b;
        };
        int64_t live = live_now();
        while (live > m.bytes) {
          Piece* victim = furthest_next_use(m.name, s);
          if (victim == nullptr) {
            HANPU_RETURN_IF_ERROR(tile(m, s, reserved, live));
            live = live_now();
            break;
          }
          live -= evict(*victim, s);
        }
        peak = std::max(peak, live);
      }
      plan_.peak_bytes[m.name] = peak;
    }
    emit_presence();
    *out = std::move(plan_);
    return Status::Ok();
  }

 private:
  // The evictable piece (present at s, not used at s, used later) whose next use is furthest away; ties:
  // larger first, then lower tensor id.
  Piece* furthest_next_use(const std::string& memory, int s) {
    Piece* best = nullptr;
    int best_next = 0;
    for (Piece& p : pieces_) {
      if (!p.in(memory, g_.ops[s].kernel) || !p.present(s) || p.used_at(s)) continue;
      const auto next = std::upper_bound(p.r.uses.begin(), p.r.uses.end(), s);
      if (next == p.r.uses.end()) continue;
      const bool better = best == nullptr || *next > best_next ||
                          (*next == best_next &&
                           (p.r.bytes > best->r.bytes || (p.r.bytes == best->r.bytes && p.r.tensor < best->r.tensor)));
      if (better) {
        best = &p;
        best_next = *next;
      }
    }
    return best;
  }

  // Only on chip: produced by this kernel, or the state (a copy in global memory must first be made).
  bool on_chip_only(const plan::Residency& r) const {
    const int prod = g_.producer(r.tensor);
    const plan::Role role = g_.tensors[r.tensor].role;
    return role == plan::Role::kStateIn || role == plan::Role::kStateOut ||
           (prod >= 0 && g_.ops[prod].kernel == r.kernel);
  }

  void move(const plan::Residency& r, int after, int before, bool may_store) {
    const bool store = may_store && on_chip_only(r) && stored_.insert(r.tensor).second;
    plan_.moves.push_back({r.tensor, r.memory, r.kernel, r.bytes, after, before, store});
    plan_.store_bytes += store ? r.bytes : 0;
    plan_.reload_bytes += r.bytes;
  }

  // Moves p out after its use before s and back before its next use; returns the bytes freed.
  int64_t evict(Piece& p, int s) {
    const plan::Residency& r = p.r;
    const int next = *std::upper_bound(r.uses.begin(), r.uses.end(), s);
    const int prev = *(std::upper_bound(r.uses.begin(), r.uses.end(), s) - 1);
    p.gaps.emplace_back(std::max(prev + 1, r.from), next - 1);
    move(r, prev, next, true);
    return r.bytes;
  }

  // Step s in the fewest tiles that fit: every piece it uses in this memory streams through.
  Status tile(const plan::Memory& m, int s, int64_t reserved, int64_t live) {
    std::vector<Piece*> now;
    int64_t rest = reserved;
    for (Piece& p : pieces_) {
      if (!p.in(m.name, g_.ops[s].kernel)) continue;
      if (p.used_at(s) && p.present(s)) now.push_back(&p);
      else rest += p.bytes_at(s);
    }
    int tiles = 2;
    auto need = [&](int k) {
      int64_t b = rest;
      for (const Piece* p : now) b += (p->r.bytes + k - 1) / k;
      return b;
    };
    while (tiles <= kMaxTiles && need(tiles) > m.bytes) ++tiles;
    if (tiles > kMaxTiles) {
      return InvalidArgument("op '" + g_.ops[s].name + "' (step " + std::to_string(s) + ") needs " +
                             std::to_string(live) + " bytes of " + m.name + ", more than its capacity of " +
                             std::to_string(m.bytes) + " bytes even in " + std::to_string(kMaxTiles) + " tiles");
    }
    for (Piece* p : now) {
      const plan::Residency& r = p->r;
      const auto after = std::upper_bound(r.uses.begin(), r.uses.end(), s);
      const int next = after == r.uses.end() ? -1 : *after;
      const int prev = after - r.uses.begin() >= 2 ? *(after - 2) : -2;  // the use before s, if any
      const bool produced_here = g_.producer(r.tensor) == s;
      if (!produced_here && prev > -2) move(r, prev, s, true);  // out before s, in tile by tile for s
      if (next >= 0) move(r, s, next, produced_here);           // out after s (its tiles), back for the next use
      const int from = produced_here || prev <= -2 ? s : std::max(prev + 1, r.from);
      p->gaps.emplace_back(from, next >= 0 ? next - 1 : r.to);
      p->partial[s] = (r.bytes + tiles - 1) / tiles;
    }
    plan_.tiled.push_back({s, m.name, tiles});
    return Status::Ok();
  }

  // Where tensors are present after the moves: each residency cut at its gaps, plus its tiles.
  void emit_presence() {
    for (Piece& p : pieces_) {
      std::sort(p.gaps.begin(), p.gaps.end());
      int from = p.r.from;
      auto emit = [&](int to) {
        if (from > to) return;
        plan::Residency piece = p.r;
        piece.from = from;
        piece.to = to;
        std::erase_if(piece.uses, [&](int u) { return u < from || u > to; });
        plan_.presence.push_back(std::move(piece));
      };
      for (const auto& [a, b] : p.gaps) {
        emit(a - 1);
        from = std::max(from, b + 1);
      }
      emit(p.r.to);
      for (const auto& [step, bytes] : p.partial) {
        plan::Residency piece = p.r;
        piece.from = piece.to = step;
        piece.bytes = bytes;
        piece.uses = {step};
        plan_.presence.push_back(std::move(piece));
      }
    }
  }

  const plan::Graph& g_;
  const plan::Device& d_;
  std::vector<Piece> pieces_;
  SpillPlan plan_;
  std::set<int> stored_;  // tensors already given a global-memory copy
};

}  // namespace

Status plan_spills(const plan::Graph& g, const plan::Device& d, SpillPlan* out) { return Planner(g, d).run(out); }

}  // namespace hanpu::sim
