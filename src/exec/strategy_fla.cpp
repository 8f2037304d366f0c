// The fla baseline: FLA's chunk-head-chunk dataflow with its materialised intermediates, on the same
// kernels as the hanpu strategy.
//   phase 1, parallel over (value head, chunk):  G, A, T = (I + A)^-1, W = T diag(beta e^G) K, U = T diag(beta) V
//            -> W [T, HV, K], U [T, HV, V] and G in memory
//   phase 2, parallel over (sequence, value head), sequential over chunks:  h[c] = S, V' = U - W S,
//            S <- e^{G_last} S + (K o e^{G_last - G})^T V'  -> every h[c] and V' [T, HV, V] in memory
//   phase 3, parallel over (value head, chunk):  O = (Q~ o e^G) h[c] + P V'
#include <algorithm>

#include "exec/strategies.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

namespace {

struct ChunkRef {
  int64_t n, t0, L, index;  // sequence, first token, rows, global chunk index
};

struct FlaScratch {
  ChunkInputs in;
  std::vector<float> kt, A, P, T, KQ, X, scratch;
  FlaScratch(int64_t C, int64_t K, int64_t V, int64_t w)
      : in(C, K, V, w), kt(K * C), A(C * C), P(C * C), T(C * C), KQ(C * K), X(C * std::max(K, V)),
        scratch(std::max(kda_scores_scratch(C, K), kTrilBlock * C)) {}
  int64_t bytes() const {
    return in.bytes() + static_cast<int64_t>((kt.size() + A.size() + P.size() + T.size() + KQ.size() + X.size() +
                                              scratch.size()) * sizeof(float));
  }
};

}  // namespace

void run_fla(const Problem& p, ThreadPool& pool, const Outputs& out, RunStats* stats) {
  const int threads = pool.size();
  const int64_t C = p.opt.chunk_size, K = p.K, V = p.V, HV = p.HV, w = p.gate_width();
  std::vector<ChunkRef> chunks;
  for (int64_t n = 0; n < p.N; ++n) {
    const Sequence& s = p.seqs[n];
    for (int64_t t0 = s.begin; t0 < s.begin + s.len; t0 += C) {
      chunks.push_back({n, t0, std::min(C, s.begin + s.len - t0), static_cast<int64_t>(chunks.size())});
    }
  }
  const int64_t NC = static_cast<int64_t>(chunks.size());
  // Materialised intermediates, indexed by (global chunk, value head) and the row within the chunk.
  std::vector<float> Wm(NC * HV * C * K), Um(NC * HV * C * V), Vn(NC * HV * C * V), H(NC * HV * K * V);
  const int64_t materialised = static_cast<int64_t>((Wm.size() + Um.size() + Vn.size() + H.size()) * sizeof(float));
  auto wm = [&](int64_t c, int64_t hv) { return Wm.data() + (c * HV + hv) * C * K; };
  auto um = [&](int64_t c, int64_t hv) { return Um.data() + (c * HV + hv) * C * V; };
  auto vn = [&](int64_t c, int64_t hv) { return Vn.data() + (c * HV + hv) * C * V; };
  auto hm = [&](int64_t c, int64_t hv) { return H.data() + (c * HV + hv) * K * V; };

  const RowLoader<float> rows(p);
  std::vector<Counters> cnt(threads);
  std::vector<int64_t> scratch_bytes(threads, 0);
  const int64_t ob = static_cast<int64_t>(dtype_size(out.o.dtype));
  pool.run([&](int t) {
    FlaScratch ws(C, K, V, w);
    scratch_bytes[t] = ws.bytes();
    Counters& c = cnt[t];
    const ChunkInputs& in = ws.in;
    int64_t b, e;
    // Phase 1: (chunk, value head) tasks.
    static_range(NC * HV, threads, t, &b, &e);
    for (int64_t task = b; task < e; ++task) {
      const ChunkRef& ch = chunks[task / HV];
      const int64_t hv = task % HV, L = ch.L;
      ws.in.load(p, rows, p.seqs[ch.n], hv, {L, ch.t0, 0, V});
      c.traffic_bytes += chunk_input_bytes(p, L, V);
      chunk_scores(p, in, L, true, false, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
      c.flops += 2.0 * tril_unit_inverse_simd(L, ws.A.data(), C, ws.T.data(), C, ws.scratch.data());
      simd::scale_rows(L, K, in.k.data(), K, in.eg.data(), w, in.beta.data(), ws.KQ.data(), K);
      lower_times(L, K, ws.T.data(), C, ws.KQ.data(), K, false, wm(ch.index, hv), K, c);
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < V; ++j) ws.X[i * V + j] = in.beta[i] * in.v[i * V + j];
      }
      lower_times(L, V, ws.T.data(), C, ws.X.data(), V, false, um(ch.index, hv), V, c);
      c.traffic_bytes += L * (K + V) * 4;  // W, U written
    }
    pool.barrier();
    // Phase 2: (sequence, value head) units, sequential over their chunks.
    static_range(p.N * HV, threads, t, &b, &e);
    std::vector<float> S(K * V);
    for (int64_t u = b; u < e; ++u) {
      const int64_t n = u / HV, hv = u % HV;
      if (p.in.initial_state) {
        load_state(p, *p.in.initial_state, n, hv, S.data());
        c.traffic_bytes += K * V * 4;
      } else {
        std::fill(S.begin(), S.end(), 0.0f);
      }
      for (const ChunkRef& ch : chunks) {
        if (ch.n != n) continue;
        const int64_t L = ch.L;
        std::copy(S.begin(), S.end(), hm(ch.index, hv));  // h[c]
        float* vnc = vn(ch.index, hv);
        gemm(L, V, K, wm(ch.index, hv), K, S.data(), V, false, vnc, V, c);  // W S
        const float* uc = um(ch.index, hv);
        for (int64_t k = 0; k < L * V; ++k) vnc[k] = uc[k] - vnc[k];
        ws.in.load(p, rows, p.seqs[n], hv, {L, ch.t0, 0, V});
        simd::scale_rows(L, K, in.k.data(), K, in.eg_last.data(), w, nullptr, ws.KQ.data(), K);
        simd::scale_rows(K, V, S.data(), V, in.g_last.data(), w == 1 ? 0 : 1, nullptr, S.data(), V);
        gemm_tn(K, V, L, ws.KQ.data(), K, vnc, V, true, S.data(), V, c);
        // read W, U, k, g; write h[c], V'
        c.traffic_bytes += L * (K + V) * 4 + chunk_input_bytes(p, L, 0) + K * V * 4 + L * V * 4;
      }
      if (out.final_state) store_state(p, *out.final_state, n, hv, S.data());
      c.traffic_bytes += K * V * 4;
    }
    pool.barrier();
    // Phase 3: (chunk, value head) tasks.
    static_range(NC * HV, threads, t, &b, &e);
    for (int64_t task = b; task < e; ++task) {
      const ChunkRef& ch = chunks[task / HV];
      const int64_t hv = task % HV, L = ch.L;
      ws.in.load(p, rows, p.seqs[ch.n], hv, {L, ch.t0, 0, 0});
      chunk_scores(p, in, L, false, true, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), c);
      simd::scale_rows(L, K, in.q.data(), K, in.eg.data(), w, nullptr, ws.KQ.data(), K);
      gemm(L, V, K, ws.KQ.data(), K, hm(ch.index, hv), V, false, ws.X.data(), V, c);
      lower_times(L, V, ws.P.data(), C, vn(ch.index, hv), V, true, ws.X.data(), V, c);
      for (int64_t i = 0; i < L; ++i) store_o_row(out.o, p.seqs[ch.n].batch, ch.t0 + i, hv, V, ws.X.data() + i * V);
      c.traffic_bytes += chunk_input_bytes(p, L, 0) + K * V * 4 + L * V * 4 + L * V * ob;  // q, k, g, h, V' in; o out
    }
  });
  if (!stats) return;
  stats->peak_workspace_bytes = materialised;
  for (int t = 0; t < threads; ++t) {
    stats->flops += cnt[t].flops;
    stats->traffic_bytes += cnt[t].traffic_bytes;
    stats->peak_workspace_bytes += scratch_bytes[t];
  }
}

}  // namespace hanpu
