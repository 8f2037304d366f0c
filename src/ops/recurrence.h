// The per-token recurrence of DESIGN.md §1, for one (sequence, value head), in precision R:
//   S <- exp(g_t) S                 (KDA: row d scaled by exp(g_t[d]))
//   u  = beta_t (v_t - S^T k_t)
//   S <- S + k_t u^T
//   o_t = S^T (scale q_t)           (read after the write)
// R = double is the fp64 reference; R = float is FLA's fused_recurrent (fp32 state and accumulation).
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
    for (int64_t d = 0; d < K; ++d) {
      const R decay = std::exp(p.kind == Kind::kGdn ? g[0] : g[d]);
      for (int64_t j = 0; j < V; ++j) S[d * V + j] *= decay;
    }
    std::fill(u.begin(), u.end(), R(0));
    for (int64_t d = 0; d < K; ++d) {
      for (int64_t j = 0; j < V; ++j) u[j] += S[d * V + j] * k[d];
    }
    for (int64_t j = 0; j < V; ++j) u[j] = beta * (v[j] - u[j]);
    std::fill(out.begin(), out.end(), R(0));
    for (int64_t d = 0; d < K; ++d) {
      for (int64_t j = 0; j < V; ++j) {
        S[d * V + j] += k[d] * u[j];
        out[j] += S[d * V + j] * q[d];
      }
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
