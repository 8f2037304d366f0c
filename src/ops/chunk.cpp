// Chunkwise prefill: the six steps of DESIGN.md §1 per chunk of C rows (the last one may be short),
// one (sequence, value head) at a time, with the fp32 state S [K, V] carried across chunks.
//
// Per chunk, L <= C rows, G = chunk-local gate cumsum (double; [L] for GDN, [L, K] for KDA):
//   #1 G      = cumsum(g)
//   #2 A_ij   = beta_i (k_i . k_j) exp(G_i - G_j), i > j        P_ij = (q~_i . k_j) exp(G_i - G_j), i >= j
//   #3 T      = (I + A)^-1
//   #4 W      = T diag(beta) (K o exp(G)),  U = T diag(beta) V
//   #5 V'     = U - W S
//   #6 O      = (Q~ o exp(G)) S + P V'                              (q~ = scale q)
//   #5 update S <- exp(G_last) o S + (K o exp(G_last - G))^T V'    (S updated after its last read)
// For KDA every "o exp(.)" is per channel; for GDN it is a per-row scalar.
//
// Numerics: exact (fp32 GEMM operands), bf16 (Options::precision: every GEMM operand rounded to bf16, fp32
// accumulation, intermediates fp32), or the emulation of FLA's half-precision dataflow (ops/fla_emulation.h),
// which is bf16 plus FLA's stored roundings: FLA keeps U in the input dtype between its kernels, so
// V' = U - W S starts from a rounded U (T, W, the per-chunk state, V' and P, which FLA also stores in bf16,
// are rounded here as the GEMM operands they are). KDA's intra-chunk scores stay fp32 in every mode.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/bf16_round.h"
#include "kernels/decay.h"
#include "kernels/gemm.h"
#include "kernels/tril_inverse.h"
#include "ops/fla_emulation.h"
#include "ops/problem.h"
#include "ops/rows.h"

namespace hanpu {

namespace {

struct Numerics {
  bool bf16_operands = false;  // GEMM operands rounded to bf16
  bool fla_stores = false;     // U rounded to bf16 where FLA stores it
};

// gemm_f32 with, for bf16 operands, A and B rounded into copies first (op(X) = X^T reads X as stored).
void mm(const Numerics& nx, Trans ta, Trans tb, int64_t M, int64_t N, int64_t Kd, float alpha, const float* A,
        int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!nx.bf16_operands) {
    gemm_f32(ta, tb, M, N, Kd, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  thread_local AlignedVector<float> a, b;
  const int64_t a_rows = ta == Trans::kN ? M : Kd, a_cols = ta == Trans::kN ? Kd : M;
  const int64_t b_rows = tb == Trans::kN ? Kd : N, b_cols = tb == Trans::kN ? N : Kd;
  round_block_bf16(a_rows, a_cols, A, lda, &a);
  round_block_bf16(b_rows, b_cols, B, ldb, &b);
  gemm_f32(ta, tb, M, N, Kd, alpha, a.data(), a_cols, b.data(), b_cols, beta, C, ldc);
}

struct ChunkWorkspace {
  int64_t C, K, V, w;
  std::vector<float> q, k, v, beta, graw, A, P, T, W, U, Vn, O, X, scratch;
  std::vector<double> G;

  ChunkWorkspace(int64_t c, int64_t k_dim, int64_t v_dim, int64_t gw)
      : C(c), K(k_dim), V(v_dim), w(gw), q(c * k_dim), k(c * k_dim), v(c * v_dim), beta(c), graw(c * gw),
        A(c * c), P(c * c), T(c * c), W(c * k_dim), U(c * v_dim), Vn(c * v_dim), O(c * v_dim),
        X(c * std::max(k_dim, v_dim)), scratch((c + 2 * kIntraBlock) * k_dim), G(c * gw) {}
};

// X[i, d] = src[i, d] * exp(G[i, d or 0] - base[d or 0]) * (rowscale ? rowscale[i] : 1), for i < L, d < K.
// base == nullptr means 0 (exp(G) itself); the callers only form exponents that are <= 0 for gates <= 0.
void scale_by_decay(int64_t L, int64_t K, int64_t w, const float* src, const double* G, const double* base,
                    bool negate, const float* rowscale, float* X) {
  for (int64_t i = 0; i < L; ++i) {
    const double rs = rowscale ? rowscale[i] : 1.0;
    for (int64_t d = 0; d < K; ++d) {
      const int64_t c = w == 1 ? 0 : d;
      const double b = base ? base[c] : 0.0;
      const double e = negate ? b - G[i * w + c] : G[i * w + c] - b;
      X[i * K + d] = static_cast<float>(src[i * K + d] * rs * std::exp(e));
    }
  }
}

void run_chunk(const Problem& p, const Numerics& nx, int64_t L, ChunkWorkspace& ws, float* S) {
  const int64_t K = p.K, V = p.V, C = ws.C, w = ws.w;
  // #1
  gate_cumsum(L, w, ws.graw.data(), ws.G.data());
  const double* G = ws.G.data();
  // #2 (and the intra-chunk output scores P)
  if (p.kind == Kind::kGdn) {
    mm(nx, Trans::kN, Trans::kT, L, L, K, 1.0f, ws.k.data(), K, ws.k.data(), K, 0.0f, ws.A.data(), C);
    decay_mask_scalar(L, G, ws.beta.data(), false, ws.A.data(), C);
    mm(nx, Trans::kN, Trans::kT, L, L, K, 1.0f, ws.q.data(), K, ws.k.data(), K, 0.0f, ws.P.data(), C);
    decay_mask_scalar(L, G, nullptr, true, ws.P.data(), C);
  } else {
    kda_intra_scores(L, K, ws.q.data(), ws.k.data(), G, ws.beta.data(), ws.A.data(), ws.P.data(), C,
                     ws.scratch.data());
  }
  // #3
  tril_unit_inverse(L, ws.A.data(), C, ws.T.data(), C);
  // #4: W = T (diag(beta) K o exp(G)),  U = T (diag(beta) V)
  scale_by_decay(L, K, w, ws.k.data(), G, nullptr, false, ws.beta.data(), ws.X.data());
  mm(nx, Trans::kN, Trans::kN, L, K, L, 1.0f, ws.T.data(), C, ws.X.data(), K, 0.0f, ws.W.data(), K);
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < V; ++j) ws.X[i * V + j] = ws.beta[i] * ws.v[i * V + j];
  }
  mm(nx, Trans::kN, Trans::kN, L, V, L, 1.0f, ws.T.data(), C, ws.X.data(), V, 0.0f, ws.U.data(), V);
  // #5 read: V' = U - W S
  if (nx.fla_stores) {
    for (int64_t i = 0; i < L * V; ++i) ws.U[i] = round_bf16(ws.U[i]);
  }
  std::copy(ws.U.begin(), ws.U.begin() + L * V, ws.Vn.begin());
  mm(nx, Trans::kN, Trans::kN, L, V, K, -1.0f, ws.W.data(), K, S, V, 1.0f, ws.Vn.data(), V);
  // #6: O = (Q~ o exp(G)) S + P V'
  scale_by_decay(L, K, w, ws.q.data(), G, nullptr, false, nullptr, ws.X.data());
  mm(nx, Trans::kN, Trans::kN, L, V, K, 1.0f, ws.X.data(), K, S, V, 0.0f, ws.O.data(), V);
  mm(nx, Trans::kN, Trans::kN, L, V, L, 1.0f, ws.P.data(), C, ws.Vn.data(), V, 1.0f, ws.O.data(), V);
  // #5 update, after the last read of the old S: S <- exp(G_last) o S + (K o exp(G_last - G))^T V'
  const double* g_last = G + (L - 1) * w;
  for (int64_t d = 0; d < K; ++d) {
    const float decay = static_cast<float>(std::exp(g_last[w == 1 ? 0 : d]));
    for (int64_t j = 0; j < V; ++j) S[d * V + j] *= decay;
  }
  scale_by_decay(L, K, w, ws.k.data(), G, g_last, true, nullptr, ws.X.data());
  mm(nx, Trans::kT, Trans::kN, K, V, L, 1.0f, ws.X.data(), K, ws.Vn.data(), V, 1.0f, S, V);
}

void chunk_sequence_head(const Problem& p, const Numerics& nx, const RowLoader<float>& rows, const Sequence& s,
                         int64_t hv, ChunkWorkspace& ws, float* S, const TensorView& o) {
  const int64_t K = p.K, V = p.V, w = ws.w, h = p.qk_head(hv);
  for (int64_t c0 = s.begin; c0 < s.begin + s.len; c0 += ws.C) {
    const int64_t L = std::min(ws.C, s.begin + s.len - c0);
    for (int64_t i = 0; i < L; ++i) {
      rows.q(s.batch, c0 + i, h, ws.q.data() + i * K);
      rows.k(s.batch, c0 + i, h, ws.k.data() + i * K);
      rows.v(s.batch, c0 + i, hv, ws.v.data() + i * V);
      rows.gate(s.batch, c0 + i, hv, ws.graw.data() + i * w);
      ws.beta[i] = rows.beta(s.batch, c0 + i, hv);
    }
    run_chunk(p, nx, L, ws, S);
    for (int64_t i = 0; i < L; ++i) store_o_row(o, s.batch, c0 + i, hv, V, ws.O.data() + i * V);
  }
}

Status chunk_forward_with(const Inputs& in, const Options& opt, const Outputs& out, bool fla_stores) {
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kChunk, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, out, Mode::kChunk));
  const Numerics nx{p.bf16_gemm || fla_stores, fla_stores};
  RowLoader<float> rows(p);
  ChunkWorkspace ws(opt.chunk_size, p.K, p.V, p.gate_width());
  std::vector<float> S(p.K * p.V);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t hv = 0; hv < p.HV; ++hv) {
      if (in.initial_state) {
        load_state(p, *in.initial_state, n, hv, S.data());
      } else {
        std::fill(S.begin(), S.end(), 0.0f);
      }
      chunk_sequence_head(p, nx, rows, p.seqs[n], hv, ws, S.data(), out.o);
      if (out.final_state) store_state(p, *out.final_state, n, hv, S.data());
    }
  }
  return Status::Ok();
}

}  // namespace

Status chunk_forward(const Inputs& in, const Options& opt, const Outputs& out) {
  return chunk_forward_with(in, opt, out, false);
}

Status fla_bf16_emulation_forward(const Inputs& in, const Options& opt, const Outputs& out) {
  return chunk_forward_with(in, opt, out, true);
}

}  // namespace hanpu
