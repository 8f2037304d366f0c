// The hanpu strategy: head-level mapping with cross-operator fusion (HA-NPU §4-§5 on a CPU).
//
// One thread owns a (sequence, value head) and runs #1-#6 for all its chunks with the state and every
// chunk intermediate in a per-thread workspace sized for its cache (0.54 MiB at C = 64, K = V = 128):
// nothing of size [T, ...] is written to memory. Heads are dealt to threads statically; the heads left
// over after the full rounds ("tail heads") are split column-wise along V over the otherwise idle threads,
// each recomputing the chunk's L x L work for its own columns, so no cross-thread reduction is needed.
//
// Per chunk, GEMM-first order (T factored out of W):
//   KS = (K o e^G) S,  QS = (Q~ o e^G) S,  A, P from K K^T and Q~ K^T,  T = (I + A)^-1
//   V' = T diag(beta) (V - KS),  O = QS + P V'
//   S <- e^{G_last} o S + (K o e^{G_last - G})^T V'        (chunk-first: in place, after the last read)
// With gemm_first off it runs FLA's order: W = T diag(beta) (K o e^G), U = T diag(beta) V, V' = U - W S.
#include <algorithm>
#include <memory>

#include "exec/strategies.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

namespace {

// How far ahead of the chunk being computed its input rows are prefetched (in chunks).
constexpr int64_t kPrefetchChunks = 1;

struct Work {
  int64_t n, hv, c0, Vc;
};

struct HeadWorkspace {
  int64_t C, K, V, w;
  ChunkInputs in;
  std::vector<float> kt, A, P, T, KS, X, Vn, O, KQ, S, S_next, scratch;  // S_next: only without chunk-first

  HeadWorkspace(int64_t C_, int64_t K_, int64_t V_, int64_t w_)
      : C(C_), K(K_), V(V_), w(w_), in(C_, K_, V_, w_), kt(K * C), A(C * C), P(C * C), T(C * C), KS(C * V),
        X(C * std::max(K, V)), Vn(C * V), O(C * V), KQ(C * K), S(K * V),
        scratch(std::max(kda_scores_scratch(C, K), kTrilBlock * C)) {}

  int64_t bytes() const {
    const std::size_t floats = kt.size() + A.size() + P.size() + T.size() + KS.size() + X.size() + Vn.size() +
                               O.size() + KQ.size() + S.size() + S_next.size() + scratch.size();
    // Without chunk-first the old and the new state co-reside (S_next); with it S is updated in place.
    return in.bytes() + static_cast<int64_t>(floats * sizeof(float));
  }
};

void fused_head(const Problem& p, const RowLoader<float>& rows, const Work& wk, const EngineConfig& cfg,
                HeadWorkspace& ws, const Outputs& out, Counters& cnt) {
  const int64_t K = p.K, Vc = wk.Vc, C = ws.in.C, w = ws.in.w;
  const Sequence& s = p.seqs[wk.n];
  float* S = ws.S.data();
  float* S_next = ws.S_next.data();
  if (p.in.initial_state) {
    load_state(p, *p.in.initial_state, wk.n, wk.hv, S, wk.c0, Vc);
  } else {
    std::fill(S, S + K * Vc, 0.0f);
  }
  const ChunkInputs& in = ws.in;
  for (int64_t t0 = s.begin; t0 < s.begin + s.len; t0 += C) {
    const ChunkRows cr{std::min(C, s.begin + s.len - t0), t0, wk.c0, Vc};
    const int64_t L = cr.L;
    ws.in.load(p, rows, s, wk.hv, cr);
    if (const int64_t ahead = t0 + kPrefetchChunks * C; ahead < s.begin + s.len) {
      ws.in.prefetch(p, s, wk.hv, {std::min(C, s.begin + s.len - ahead), ahead, wk.c0, Vc});
    }
    cnt.traffic_bytes += chunk_input_bytes(p, L, Vc);
    chunk_scores(p, in, L, true, true, ws.kt.data(), ws.A.data(), ws.P.data(), ws.scratch.data(), cnt);
    cnt.flops += 2.0 * tril_unit_inverse_simd(L, ws.A.data(), C, ws.T.data(), C, ws.scratch.data());
    const float* e = in.eg.data();
    if (cfg.gemm_first) {
      // KS = (K o e) S;  X = diag(beta) (V - KS);  O = (Q~ o e) S
      simd::scale_rows(L, K, in.k.data(), K, e, w, nullptr, ws.KQ.data(), K);
      gemm(L, Vc, K, ws.KQ.data(), K, S, Vc, false, ws.KS.data(), Vc, cnt);
      simd::scale_rows(L, K, in.q.data(), K, e, w, nullptr, ws.KQ.data(), K);
      gemm(L, Vc, K, ws.KQ.data(), K, S, Vc, false, ws.O.data(), Vc, cnt);
      simd::beta_residual(L, Vc, in.beta.data(), in.v.data(), ws.KS.data(), ws.X.data());
      lower_times(L, Vc, ws.T.data(), C, ws.X.data(), Vc, false, ws.Vn.data(), Vc, cnt);  // V' = T X
    } else {
      // W = T diag(beta) (K o e);  U = T diag(beta) V;  V' = U - W S;  O = (Q~ o e) S
      simd::scale_rows(L, K, in.k.data(), K, e, w, in.beta.data(), ws.KQ.data(), K);
      lower_times(L, K, ws.T.data(), C, ws.KQ.data(), K, false, ws.X.data(), K, cnt);  // W (in X)
      gemm(L, Vc, K, ws.X.data(), K, S, Vc, false, ws.KS.data(), Vc, cnt);             // W S
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < Vc; ++j) ws.X[i * Vc + j] = in.beta[i] * in.v[i * Vc + j];
      }
      lower_times(L, Vc, ws.T.data(), C, ws.X.data(), Vc, false, ws.Vn.data(), Vc, cnt);  // U
      for (int64_t k = 0; k < L * Vc; ++k) ws.Vn[k] -= ws.KS[k];
      simd::scale_rows(L, K, in.q.data(), K, e, w, nullptr, ws.KQ.data(), K);
      gemm(L, Vc, K, ws.KQ.data(), K, S, Vc, false, ws.O.data(), Vc, cnt);
    }
    lower_times(L, Vc, ws.P.data(), C, ws.Vn.data(), Vc, true, ws.O.data(), Vc, cnt);  // O += P V'
    // State update after the last read of S this chunk.
    simd::scale_rows(L, K, in.k.data(), K, in.eg_last.data(), w, nullptr, ws.KQ.data(), K);  // K o e^{G_last - G}
    float* dst = cfg.chunk_first ? S : S_next;
    simd::scale_rows(K, Vc, S, Vc, in.g_last.data(), w == 1 ? 0 : 1, nullptr, dst, Vc);  // e^{G_last} o S
    gemm_tn(K, Vc, L, ws.KQ.data(), K, ws.Vn.data(), Vc, true, dst, Vc, cnt);
    if (!cfg.chunk_first) std::swap(S, S_next);
    for (int64_t i = 0; i < L; ++i) store_o_row(out.o, s.batch, t0 + i, wk.hv, Vc, ws.O.data() + i * Vc, wk.c0);
    cnt.traffic_bytes += L * Vc * static_cast<int64_t>(dtype_size(out.o.dtype));
  }
  if (out.final_state) store_state(p, *out.final_state, wk.n, wk.hv, S, wk.c0, Vc);
  cnt.traffic_bytes += (p.in.initial_state ? 2 : 1) * K * Vc * 4;
}

// Static assignment: full rounds of whole heads, round-robin; then the tail heads, each split along V
// (at multiples of the GEMM column block, for bit-identical results) over the threads t with t % R == r.
std::vector<std::vector<Work>> assign(const Problem& p, const EngineConfig& cfg, int threads) {
  std::vector<std::vector<Work>> plan(threads);
  const int64_t units = p.N * p.HV;
  const int64_t full = cfg.tail_split ? units / threads * threads : units;
  for (int64_t u = 0; u < full; ++u) plan[u % threads].push_back({u / p.HV, u % p.HV, 0, p.V});
  const int64_t tail = units - full;
  if (tail == 0) return plan;
  const int64_t cb = simd::gemm_column_block();
  const int64_t blocks = (p.V + cb - 1) / cb;
  for (int64_t r = 0; r < tail; ++r) {
    const int64_t u = full + r;
    std::vector<int> group;
    for (int t = 0; t < threads; ++t) {
      if (t % tail == r) group.push_back(t);
    }
    const int g = static_cast<int>(group.size());
    for (int j = 0; j < g; ++j) {
      int64_t b0, b1;
      static_range(blocks, g, j, &b0, &b1);
      const int64_t c0 = b0 * cb, c1 = std::min(p.V, b1 * cb);
      if (c1 > c0) plan[group[j]].push_back({u / p.HV, u % p.HV, c0, c1 - c0});
    }
  }
  return plan;
}

}  // namespace

void run_hanpu(const Problem& p, const EngineConfig& cfg, ThreadPool& pool, const Outputs& out, RunStats* stats) {
  const int threads = pool.size();
  const std::vector<std::vector<Work>> plan = assign(p, cfg, threads);
  const RowLoader<float> rows(p);
  std::vector<Counters> counters(threads);
  std::vector<int64_t> ws_bytes(threads, 0);
  pool.run([&](int t) {
    if (plan[t].empty()) return;
    int64_t vmax = 0;
    for (const Work& wk : plan[t]) vmax = std::max(vmax, wk.Vc);
    // The workspace outlives the call (one per pool thread), so repeated calls reuse warm memory.
    thread_local std::unique_ptr<HeadWorkspace> cached;
    const int64_t C = p.opt.chunk_size, w = p.gate_width();
    if (!cached || cached->C != C || cached->K != p.K || cached->V < vmax || cached->w != w) {
      cached = std::make_unique<HeadWorkspace>(C, p.K, vmax, w);
    }
    HeadWorkspace& ws = *cached;
    if (cfg.chunk_first) {
      std::vector<float>().swap(ws.S_next);
    } else {
      ws.S_next.resize(ws.S.size());
    }
    ws_bytes[t] = ws.bytes();
    for (const Work& wk : plan[t]) fused_head(p, rows, wk, cfg, ws, out, counters[t]);
  });
  if (!stats) return;
  for (int t = 0; t < threads; ++t) {
    stats->flops += counters[t].flops;
    stats->traffic_bytes += counters[t].traffic_bytes;
    stats->peak_workspace_bytes += ws_bytes[t];
  }
}

int64_t chunk_input_bytes(const Problem& p, int64_t L, int64_t Vc) {
  const Inputs& in = p.in;
  return L * (2 * p.K * static_cast<int64_t>(dtype_size(in.q.dtype)) + Vc * static_cast<int64_t>(dtype_size(in.v.dtype)) +
              p.gate_width() * static_cast<int64_t>(dtype_size(in.g.dtype)) +
              static_cast<int64_t>(dtype_size(in.beta.dtype)));
}

}  // namespace hanpu
