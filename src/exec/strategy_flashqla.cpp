// The flashqla baseline: FlashQLA's chunk-seg-seg dataflow (QwenLM/FlashQLA, summarised in
// shared/research/fla_semantics.md §7) on the engine's kernels.
//
//   1. over (chunk, value head): #1-#4 -> W, U in memory (as fla), plus each chunk's decay
//   2. over (value head, segment), segments of Lseg chunks: from a zero state, run the recurrence over
//      the segment's last "warm-up" chunks, walking back until the accumulated decay falls below
//      e^log_threshold; that gives the segment's end state up to terms attenuated below the threshold.
//      A head whose segment never decays that far is a fallback: its warm-up is the whole segment and
//      the segment's exact transition matrix M (K x K, the state map's linear part) is formed too.
//   3. over (sequence, value head), serially over segments: h0[i+1] = ht[i] + (fallback ? M[i] h0[i] : 0)
//   4. over (value head, segment): from h0, the fused recurrence and output of every chunk.
// FlashQLA uses e^-10, which drops state contributions of relative size ~4.5e-5 (NMSE ~2e-9, above the
// 1e-10 fp32 bar of DESIGN.md §1); hanpu's default is e^-25 (~1.4e-11). The bound holds while the
// delta-rule step is non-expanding (0 <= beta |k|^2 <= 2, e.g. l2-normalised keys); a segment with a token
// where it is not (checked per call, per token) takes the exact transition-matrix path.
#include <cmath>

#include "exec/materialised.h"
#include "exec/phase_runner.h"

namespace hanpu {

namespace {

struct Segment {
  int64_t n, first, count;  // sequence, first global chunk, chunks
};

}  // namespace

void run_flashqla(const Problem& p, const EngineConfig& cfg, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out,
                  RunStats* stats) {
  const int64_t K = p.K, V = p.V, HV = p.HV;
  Materialised m(p, false, false);
  const std::vector<ChunkRef>& chunks = m.chunks();
  const int64_t lseg = mp.segment_chunks;  // the plan's segments (FlashQLA's rule unless set)
  std::vector<Segment> segs;
  std::vector<int64_t> first_seg(p.N + 1, 0);  // segments of sequence n: [first_seg[n], first_seg[n + 1])
  for (int64_t n = 0, c = 0; n < p.N; ++n) {
    first_seg[n] = static_cast<int64_t>(segs.size());
    int64_t count = 0;
    while (c + count < static_cast<int64_t>(chunks.size()) && chunks[c + count].n == n) ++count;
    for (int64_t s = 0; s < count; s += lseg) segs.push_back({n, c + s, std::min(lseg, count - s)});
    c += count;
  }
  first_seg[p.N] = static_cast<int64_t>(segs.size());
  const int64_t NS = static_cast<int64_t>(segs.size());
  // Per (segment, value head): end state from the warm-up, initial state, transition matrix if fallback.
  AlignedVector<float> ht(NS * HV * K * V), h0(NS * HV * K * V), M(NS * HV * K * K);
  std::vector<char> fallback(NS * HV, 0);
  Workers w(pool, p);
  // 2. Warm-up end states (every segment but the last of its sequence: the plan maps no warm-up there,
  //    the last segment's end is the final state), and transition matrices.
  // Whether some chunk of the segment has a token whose delta rule may expand the state.
  auto expanding = [&](const Segment& sg, int64_t hv) {
    for (int64_t c0 = sg.first; c0 < sg.first + sg.count; ++c0) {
      if (std::isinf(m.chunk_log_decay(c0 * HV + hv))) return true;
    }
    return false;
  };
  auto warmup = [&](int64_t i, Scratch& s, Counters& c) {
    const Segment& sg = segs[i / HV];
    const int64_t hv = i % HV;
    int64_t wc = 0;
    double decay = 0;
    while (wc < sg.count && decay >= cfg.flashqla_log_threshold) {
      decay += m.chunk_log_decay((sg.first + sg.count - 1 - wc) * HV + hv);
      ++wc;
    }
    // Never decayed enough over the whole segment, or a token's delta rule may expand the state somewhere
    // in it (the bound is void): the segment is made exact, its warm-up the whole segment.
    const bool fb = !(decay < cfg.flashqla_log_threshold) || expanding(sg, hv);
    fallback[i] = fb;
    if (fb) wc = sg.count;
    float* h = ht.data() + i * K * V;
    std::fill(h, h + K * V, 0.0f);
    for (int64_t c0 = sg.first + sg.count - wc; c0 < sg.first + sg.count; ++c0) m.advance(c0 * HV + hv, s, h, V, true, c);
    if (!fb) return;
    float* mat = M.data() + i * K * K;
    std::fill(mat, mat + K * K, 0.0f);
    for (int64_t d = 0; d < K; ++d) mat[d * K + d] = 1.0f;
    for (int64_t c0 = sg.first; c0 < sg.first + sg.count; ++c0) m.advance(c0 * HV + hv, s, mat, K, false, c);
  };
  // 3. Serial correction of segment initial states, per (sequence, value head).
  auto hand_on = [&](int64_t u, Counters& c) {
    const int64_t n = u / HV, hv = u % HV;
    for (int64_t g = first_seg[n]; g < first_seg[n + 1]; ++g) {
      float* h = h0.data() + (g * HV + hv) * K * V;
      if (g == first_seg[n]) {
        if (p.in.initial_state) {
          load_state(p, *p.in.initial_state, n, hv, h);
        } else {
          std::fill(h, h + K * V, 0.0f);
        }
        continue;
      }
      const int64_t prev = (g - 1) * HV + hv;
      const float* hp = h0.data() + prev * K * V;
      const float* e = ht.data() + prev * K * V;
      if (fallback[prev]) {
        gemm(K, V, K, M.data() + prev * K * K, K, hp, V, false, h, V, c);  // M h0[prev]
        for (int64_t k = 0; k < K * V; ++k) h[k] += e[k];
      } else {
        std::copy(e, e + K * V, h);
      }
    }
  };
  // 4. Fused recurrence and output per (segment, value head), from the corrected initial states.
  auto segment = [&](int64_t i, Scratch& s, Counters& c) {
    const Segment& sg = segs[i / HV];
    const int64_t hv = i % HV;
    float* S = s.S.data();
    std::copy(h0.data() + i * K * V, h0.data() + (i + 1) * K * V, S);
    s.state_in.resize(K * V);  // in the worker's scratch, so the workspace figure counts them
    s.vn.resize(p.opt.chunk_size * V);
    for (int64_t c0 = sg.first; c0 < sg.first + sg.count; ++c0) {
      std::copy(S, S + K * V, s.state_in.begin());
      m.advance(c0 * HV + hv, s, S, V, true, c, s.vn.data());
      m.output_from(c0 * HV + hv, s, s.state_in.data(), s.vn.data(), c, out);
    }
    if (i / HV + 1 == first_seg[sg.n + 1] && out.final_state) store_state(p, *out.final_state, sg.n, hv, S);
  };
  // The plan's phases: 1. W, U and chunk decays per chunk, then 2-4 above.
  const PhaseRunner runner(mp);
  runner.run(pool, 0, static_cast<int>(mp.phases.size()), [&](int ph, int t, const plan::WorkItem& it) {
    Scratch& s = w.scratch(t);
    Counters& c = w.counters(t);
    const int64_t seg_index = (first_seg[it.seq] + it.chunk0 / lseg) * HV + it.hv;
    switch (mp.phases[ph].work) {
      case plan::Work::kPrepareWU:
        for (int64_t ch = it.chunk0; ch < it.chunk0 + it.chunks; ++ch) m.fused_wu(m.task(it.seq, ch, it.hv), s, c);
        break;
      case plan::Work::kWarmup: warmup(seg_index, s, c); break;
      case plan::Work::kHandOn: hand_on(it.seq * HV + it.hv, c); break;
      case plan::Work::kSegment: segment(seg_index, s, c); break;
      default: break;  // refused up front
    }
  });
  // Empty sequences have no segment: their final state is their initial state.
  for (int64_t n = 0; n < p.N && out.final_state; ++n) {
    if (first_seg[n] != first_seg[n + 1]) continue;
    AlignedVector<float> S(K * V, 0.0f);
    for (int64_t hv = 0; hv < HV; ++hv) {
      if (p.in.initial_state) load_state(p, *p.in.initial_state, n, hv, S.data());
      store_state(p, *out.final_state, n, hv, S.data());
    }
  }
  if (stats) w.report(m.bytes() + static_cast<int64_t>((ht.size() + h0.size() + M.size()) * 4), stats);
}

}  // namespace hanpu
