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
#include "exec/materialised.h"

namespace hanpu {

void run_materialising(const Problem& p, Strategy strategy, ThreadPool& pool, const Outputs& out, RunStats* stats) {
  Materialised m(p, strategy == Strategy::kNative, true);
  Workers w(pool, p);
  auto fused_wu = [&](int64_t i, Scratch& s, Counters& c) { m.fused_wu(i, s, c); };
  auto states = [&](int64_t u, Scratch& s, Counters& c) { m.states(u, s, c, out); };
  auto output = [&](int64_t i, Scratch& s, Counters& c) { m.output(i, s, c, out); };
  switch (strategy) {
    case Strategy::kNative:
      w.launch(m.tasks(), [&](int64_t i, Scratch&, Counters& c) { m.load(i, c); });
      w.launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.kkt(i, s, c); });
      w.launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.solve(i, s, c); });
      w.launch(m.tasks(), [&](int64_t i, Scratch& s, Counters& c) { m.wu_stored(i, s, c); });
      w.launch(m.units(), states);
      w.launch(m.tasks(), output);
      break;
    case Strategy::kFlaMegakernel:
      pool.run([&](int t) {
        w.phase(t, m.tasks(), fused_wu);
        pool.barrier();
        w.phase(t, m.units(), states);
        pool.barrier();
        w.phase(t, m.tasks(), output);
      });
      break;
    default:  // Strategy::kFla
      w.launch(m.tasks(), fused_wu);
      w.launch(m.units(), states);
      w.launch(m.tasks(), output);
      break;
  }
  if (stats) w.report(m.bytes(), stats);
}

}  // namespace hanpu
