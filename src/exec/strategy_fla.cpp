// The materialising baselines, on the same kernels as the hanpu strategy (DESIGN.md §2):
//
// fla (chunk-head-chunk), three parallel launches:
//   1. over (chunk, value head):  G, A, T = (I + A)^-1, W = T diag(beta e^G) K, U = T diag(beta) V
//      -> W [chunks, HV, C, K] and U [chunks, HV, C, V] in memory
//   2. over (sequence, value head), sequential over chunks:  h[c] = S, V' = U - W S,
//      S <- e^{G_last} S + (K o e^{G_last - G})^T V'  -> every h[c] and V' in memory
//   3. over (chunk, value head):  O = (Q~ o e^G) h[c] + P V'
// fla-megakernel: the same three phases inside one parallel region, separated by barriers.
// native: one launch per operator, every intermediate in a full-size buffer: #1 rows and gates, #2 A,
//   #3 T, #4 W and U, #5 states and V', #6 O (how a plain port of the chunk algorithm runs it).
// Which phases, launches or barriers and which worker runs what come from the execution plan's mapping
// (plan/strategy.cpp); this file only runs each phase's work on its items.
#include "exec/materialised.h"
#include "exec/phase_runner.h"

namespace hanpu {

void run_materialising(const Problem& p, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out, RunStats* stats) {
  bool native = false;
  for (const plan::Phase& ph : mp.phases) native |= ph.work == plan::Work::kLoad;
  Materialised m(p, native, true);
  Workers w(pool, p);
  const PhaseRunner runner(mp);
  runner.run(pool, 0, static_cast<int>(mp.phases.size()), [&](int ph, int t, const plan::WorkItem& it) {
    Scratch& s = w.scratch(t);
    Counters& c = w.counters(t);
    const plan::Work work = mp.phases[ph].work;
    if (work == plan::Work::kRecurrence) {
      m.states(it.seq * p.HV + it.hv, s, c, out);
      return;
    }
    for (int64_t ch = it.chunk0; ch < it.chunk0 + it.chunks; ++ch) {
      const int64_t task = m.task(it.seq, ch, it.hv);
      switch (work) {
        case plan::Work::kLoad: m.load(task, c); break;
        case plan::Work::kScores: m.kkt(task, s, c); break;
        case plan::Work::kSolve: m.solve(task, s, c); break;
        case plan::Work::kWU: m.wu_stored(task, s, c); break;
        case plan::Work::kPrepareWU: m.fused_wu(task, s, c); break;
        case plan::Work::kOutput: m.output(task, s, c, out); break;
        default: break;  // refused up front (materialising_works)
      }
    }
  });
  if (stats) w.report(m.bytes(), stats);
}

}  // namespace hanpu
