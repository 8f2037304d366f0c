#include "plan/strategy.h"

#include <algorithm>
#include <cmath>

namespace hanpu::plan {

namespace {

StrategyOptions baseline(Dataflow d) {
  StrategyOptions o;
  o.dataflow = d;
  o.tail_split = o.chunk_first = o.gemm_first = o.layout_plan = false;
  return o;
}

StrategyOptions head_level(bool tail_split, bool chunk_first, bool gemm_first, bool layout_plan) {
  return {Dataflow::kHeadLevel, tail_split, chunk_first, gemm_first, layout_plan};
}

}  // namespace

const std::vector<StrategyInfo>& strategies() {
  static const std::vector<StrategyInfo> s = {
      {"native", "one launch per operator, every intermediate in a full-size buffer", baseline(Dataflow::kNative)},
      {"fla", "FLA's chunk-head-chunk: W, U, V' and every chunk's state in memory, three launches",
       baseline(Dataflow::kFla)},
      {"fla-megakernel", "the fla dataflow in one launch, barriers between its phases",
       baseline(Dataflow::kFlaMegakernel)},
      {"flashqla", "FlashQLA's chunk-seg-seg: segment-parallel state passing from zero-state warm-ups",
       baseline(Dataflow::kFlashQla)},
      {"hanpu", "head-level fusion, tail split, chunk-first, GEMM-first and the layout plan",
       head_level(true, true, true, true)},
  };
  return s;
}

const std::vector<StrategyInfo>& ablation_ladder() {
  static const std::vector<StrategyInfo> s = {
      {"fla", "the baseline", baseline(Dataflow::kFla)},
      {"+fusion", "head-level mapping, FLA's order, fixed layouts", head_level(false, false, false, false)},
      {"+tail-split", "and tail heads split along V", head_level(true, false, false, false)},
      {"+chunk-first", "and the chunk-first order", head_level(true, true, false, false)},
      {"+gemm-first", "and GEMM-first rewriting", head_level(true, true, true, false)},
      {"+layout-plan", "and the layout plan (= hanpu)", head_level(true, true, true, true)},
  };
  return s;
}

std::vector<std::string> names_of(const std::vector<StrategyInfo>& list) {
  std::vector<std::string> out;
  for (const StrategyInfo& s : list) out.push_back(s.name);
  return out;
}

const StrategyInfo* find_strategy(const std::string& name) {
  for (const auto* list : {&strategies(), &ablation_ladder()}) {
    for (const StrategyInfo& s : *list) {
      if (s.name == name) return &s;
    }
  }
  return nullptr;
}

std::string strategy_names(bool with_ablation) {
  std::string out;
  for (const StrategyInfo& s : strategies()) out += (out.empty() ? "" : ", ") + s.name;
  if (with_ablation) {
    for (const StrategyInfo& s : ablation_ladder()) {
      if (s.name.front() == '+') out += ", " + s.name;
    }
  }
  return out;
}

Status unknown_strategy(const std::string& name, bool with_ablation) {
  return InvalidArgument("unknown strategy '" + name + "' (known: " + strategy_names(with_ablation) + ")");
}

KernelSplit kernel_split(Dataflow d) {
  switch (d) {
    case Dataflow::kNative: return KernelSplit::kNative;
    case Dataflow::kFla:
    case Dataflow::kFlaMegakernel: return KernelSplit::kFla;
    case Dataflow::kFlashQla: return KernelSplit::kFlashQla;
    case Dataflow::kHeadLevel: return KernelSplit::kFused;
  }
  return KernelSplit::kFused;
}

int64_t segment_length(int64_t units, int64_t chunks, int workers) {
  const double x = 3.0 * std::sqrt(static_cast<double>(units) * static_cast<double>(chunks) / workers);
  return std::max<int64_t>(4, int64_t{1} << static_cast<int>(std::lround(std::log2(std::max(1.0, x)))));
}

int choose_tail_split(int64_t tail, int workers, double head_cost, const std::vector<double>& slice_cost) {
  double best = static_cast<double>((tail + workers - 1) / workers) * head_cost;
  int split = 1;
  for (std::size_t s = 2; s < slice_cost.size(); ++s) {
    if (!(slice_cost[s] > 0)) continue;
    const double t = static_cast<double>((tail * static_cast<int64_t>(s) + workers - 1) / workers) * slice_cost[s];
    if (t < best) {
      best = t;
      split = static_cast<int>(s);
    }
  }
  return split;
}

int64_t slice_width(int64_t V, int s, int64_t align) {
  const int64_t w = (V + s - 1) / s;
  return (w + align - 1) / align * align;
}

namespace {

// Appends items to `m`, dealing them round robin over the workers in the order given.
class Dealer {
 public:
  Dealer(Mapping& m, int phase) : m_(m), phase_(phase) {}
  void add(int64_t seq, int64_t hv, int64_t chunk0, int64_t chunks, int64_t col0, int64_t cols) {
    m_.items.push_back({phase_, static_cast<int>(next_++ % m_.shape.workers), seq, hv, chunk0, chunks, col0, cols});
  }

 private:
  Mapping& m_;
  int phase_;
  int64_t next_ = 0;
};

int add_phase(Mapping& m, Work w, Sync s, unsigned kernels, std::vector<unsigned> launches = {}) {
  m.phases.push_back({w, s, kernels, std::move(launches)});
  return static_cast<int>(m.phases.size()) - 1;
}

// Per-chunk items of every unit, chunk-major (chunk c of every value head, then chunk c + 1).
void per_chunk(Mapping& m, int phase) {
  Dealer d(m, phase);
  const Shape& sh = m.shape;
  for (std::size_t n = 0; n < sh.seq_tokens.size(); ++n) {
    for (int64_t c = 0; c < sh.chunks(n); ++c) {
      for (int64_t hv = 0; hv < sh.HV; ++hv) d.add(static_cast<int64_t>(n), hv, c, 1, 0, sh.V);
    }
  }
}

// One item per unit covering all its chunks.
void per_unit(Mapping& m, int phase) {
  Dealer d(m, phase);
  const Shape& sh = m.shape;
  for (int64_t u = 0; u < sh.units(); ++u) d.add(u / sh.HV, u % sh.HV, 0, sh.chunks(u / sh.HV), 0, sh.V);
}

void map_materialising(Dataflow df, Mapping& m) {
  if (df == Dataflow::kNative) {
    const Work works[] = {Work::kLoad, Work::kScores, Work::kSolve, Work::kWU, Work::kRecurrence, Work::kOutput};
    for (int k = 0; k < 6; ++k) {
      const int ph = add_phase(m, works[k], Sync::kLaunch, 1u << k);
      works[k] == Work::kRecurrence ? per_unit(m, ph) : per_chunk(m, ph);
    }
    return;
  }
  // FLA's five kernels (graph.h KernelSplit::kFla): cumsum, kkt + solve and wy over (chunk, head) — one
  // phase of three launches, fused into one pass by the CPU executor — then fwd_h and fwd_o.
  const Sync between = df == Dataflow::kFlaMegakernel ? Sync::kBarrier : Sync::kLaunch;
  per_chunk(m, add_phase(m, Work::kPrepareWU, Sync::kLaunch, 0b111u, {1u << 0, 1u << 1, 1u << 2}));
  per_unit(m, add_phase(m, Work::kRecurrence, between, 1u << 3));
  per_chunk(m, add_phase(m, Work::kOutput, between, 1u << 4));
}

// flashqla: #1-#4 per chunk; warm-ups per (unit, segment) but each sequence's last; the serial hand-on
// per unit; the fused recurrence and output per (unit, segment). Segments are enumerated unit-major.
void map_flashqla(const MapInputs& in, Mapping& m) {
  const Shape& sh = m.shape;
  const int64_t lseg = in.segment_chunks > 0 ? in.segment_chunks : segment_length(sh.units(), sh.total_chunks(), sh.workers);
  m.segment_chunks = lseg;
  per_chunk(m, add_phase(m, Work::kPrepareWU, Sync::kLaunch, 0b11u, {1u << 0, 1u << 1}));  // cumsum, kkt + solve
  auto segments = [&](Work w, unsigned kernels, bool skip_last) {
    Dealer d(m, add_phase(m, w, Sync::kLaunch, kernels));
    for (int64_t u = 0; u < sh.units(); ++u) {
      const int64_t chunks = sh.chunks(u / sh.HV);
      for (int64_t c = 0; c < chunks; c += lseg) {
        if (skip_last && c + lseg >= chunks) break;
        d.add(u / sh.HV, u % sh.HV, c, std::min(lseg, chunks - c), 0, sh.V);
      }
    }
  };
  segments(Work::kWarmup, 1u << 2, true);  // W, U and the state from a zero state
  per_unit(m, add_phase(m, Work::kHandOn, Sync::kLaunch, 0));
  segments(Work::kSegment, (1u << 2) | (1u << 3), false);  // W, U, state and output fused
}

// hanpu: whole units in contiguous blocks, one block per worker (neighbouring value heads share their input
// rows' pages and cache lines); with a tail split, the tail units' column slices dealt round robin from
// worker 0. An extreme tail (at most half the workers busy, some unit with several chunks) is prepared
// chunk-parallel over every worker when allowed, then run per unit.
void map_head_level(const StrategyOptions& so, const MapInputs& in, Mapping& m) {
  const Shape& sh = m.shape;
  const int64_t units = sh.units();
  const int64_t tail = units % sh.workers;
  int split = 1;
  if (so.tail_split && tail > 0) split = choose_tail_split(tail, sh.workers, in.head_cost, in.slice_cost);
  m.tail_split = split;
  const int64_t whole = split > 1 ? units - tail : units;
  const int64_t width = split > 1 ? slice_width(sh.V, split, m.column_align) : sh.V;
  std::vector<WorkItem> heads;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t chunks = sh.chunks(u / sh.HV);
    if (u < whole || chunks == 0) {  // an empty sequence is one item: its state passes through whole
      heads.push_back({0, 0, u / sh.HV, u % sh.HV, 0, chunks, 0, sh.V});
      continue;
    }
    for (int64_t c0 = 0; c0 < sh.V; c0 += width) {
      heads.push_back({0, 0, u / sh.HV, u % sh.HV, 0, chunks, c0, std::min(width, sh.V - c0)});
    }
  }
  int64_t most_chunks = 0;
  for (int64_t n = 0; n < sh.sequences(); ++n) most_chunks = std::max(most_chunks, sh.chunks(n));
  const bool fallback = in.chunk_parallel_fallback && 2 * static_cast<int64_t>(heads.size()) <= sh.workers &&
                        most_chunks >= 2;
  if (fallback) {
    Dealer prep(m, add_phase(m, Work::kPrepare, Sync::kLaunch, ~0u));
    for (const WorkItem& h : heads) {
      for (int64_t c = 0; c < h.chunks; ++c) prep.add(h.seq, h.hv, c, 1, h.col0, h.cols);
    }
  }
  const int phase = add_phase(m, fallback ? Work::kStatePart : Work::kHead, Sync::kLaunch, ~0u);
  const int W = sh.workers;
  std::vector<int> owner(static_cast<std::size_t>(whole));  // worker t holds units [whole t / W, whole (t + 1) / W)
  for (int t = 0; t < W; ++t) {
    for (int64_t u = whole * t / W; u < whole * (t + 1) / W; ++u) owner[u] = t;
  }
  int64_t slice = 0;
  for (const WorkItem& h : heads) {
    const int64_t u = h.seq * sh.HV + h.hv;
    const int worker = u < whole ? owner[u] : static_cast<int>(slice++ % W);
    m.items.push_back({phase, worker, h.seq, h.hv, h.chunk0, h.chunks, h.col0, h.cols});
  }
}

}  // namespace

Status map_work(const StrategyOptions& so, const Shape& shape, int64_t column_align, const MapInputs& in, Mapping* out) {
  if (shape.workers < 1) return InvalidArgument("workers must be >= 1, got " + std::to_string(shape.workers));
  if (shape.HV < 1) return InvalidArgument("value heads must be >= 1, got " + std::to_string(shape.HV));
  if (shape.V < 1) return InvalidArgument("V must be >= 1, got " + std::to_string(shape.V));
  if (column_align < 1) return InvalidArgument("column alignment must be >= 1");
  Mapping m;
  m.shape = shape;
  m.column_align = column_align;
  switch (so.dataflow) {
    case Dataflow::kHeadLevel: map_head_level(so, in, m); break;
    case Dataflow::kFlashQla: map_flashqla(in, m); break;
    default: map_materialising(so.dataflow, m); break;
  }
  HANPU_RETURN_IF_ERROR(check_mapping(m));
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace hanpu::plan
