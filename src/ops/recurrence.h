// The per-token recurrence of DESIGN.md §1, for one (sequence, value head), in precision R:
//   S <- exp(g_t) S                 (KDA: row d scaled by exp(g_t[d]))
//   u  = beta_t (v_t - S^T k_t)
//   S <- S + k_t u^T
//   o_t = S^T (scale q_t)           (read after the write)
// R = double is the fp64 reference; R = float is FLA's fused_recurrent with its fp32 state.
// The readout is o = (D S)^T q + (k . q) u, D S the decayed state before the write: the same value as S'^T q,
// but free of the rounding of the written state S', as the engine's decode kernels compute it, with k . q
// formed and summed in double (a product of two fp32 values is exact there) and rounded once.
// Where q is nearly orthogonal to k's contribution the readout cancels: one token from a zero state with
// K = 256 (`hanpu verify --seed 214 --instances 720`, instance 306) read back from S' and summed in fp32 came
// to NMSE 1.8e-10 against the fp64 reference (the exact bar is 1e-10); computed as here, 2e-12.
#pragma once

#include <cmath>
#include <vector>

#include "ops/rows.h"

namespace hanpu {

template <typename R>
void recur_sequence(const Problem& p, const RowLoader<R>& rows, const Sequence& s, int64_t hv, R* S,
                    const TensorView& o) {
  const int64_t K = p.K, V = p.V;
  std::vector<R> q(K), k(K), g(p.gate_width()), v(V), u(V), out(V);
  for (int64_t t = s.begin; t < s.begin + s.len; ++t) {
    const R beta = rows.token(s.batch, t, hv, q.data(), k.data(), v.data(), g.data());
    std::fill(u.begin(), u.end(), R(0));
    std::fill(out.begin(), out.end(), R(0));
    double kq = 0;
    for (int64_t d = 0; d < K; ++d) {  // S <- D S; u = S^T k and out = S^T q from it
      const R decay = std::exp(p.kind == Kind::kGdn ? g[0] : g[d]), kd = k[d], qd = q[d];
      R* __restrict row = S + d * V;  // distinct arrays: lets the compiler vectorise over j
      R* __restrict ua = u.data();
      R* __restrict oa = out.data();
      for (int64_t j = 0; j < V; ++j) {
        const R x = row[j] * decay;
        row[j] = x;
        ua[j] += x * kd;
        oa[j] += x * qd;
      }
      kq += static_cast<double>(kd) * qd;
    }
    for (int64_t j = 0; j < V; ++j) {
      u[j] = beta * (v[j] - u[j]);
      out[j] += static_cast<R>(kq) * u[j];
    }
    for (int64_t d = 0; d < K; ++d) {  // S <- S + k u^T
      for (int64_t j = 0; j < V; ++j) S[d * V + j] += k[d] * u[j];
    }
    store_o_row(o, s.batch, t, hv, V, out.data());
  }
}

// Runs every (sequence, value head) of a validated problem, states from initial_state (or zero) to
// final_state (when requested).
template <typename R>
void recur_all(const Problem& p, const Outputs& out) {
  RowLoader<R> rows(p);
  std::vector<R> S(p.K * p.V);
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t hv = 0; hv < p.HV; ++hv) {
      if (p.in.initial_state) {
        load_state(p, *p.in.initial_state, n, hv, S.data());
      } else {
        std::fill(S.begin(), S.end(), R(0));
      }
      recur_sequence(p, rows, p.seqs[n], hv, S.data(), out.o);
      if (out.final_state) store_state(p, *out.final_state, n, hv, S.data());
    }
  }
}

}  // namespace hanpu
