// Token rows of a validated problem, with the in-kernel preprocessing applied: l2norm of q and k, the
// scale folded into q, in-kernel gates and beta. R is double for the reference and float for the fp32
// paths; both read the same (possibly rounded half-precision) input values.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/strided.h"
#include "ops/gates.h"
#include "ops/problem.h"

namespace hanpu {

template <typename R>
class RowLoader {
 public:
  explicit RowLoader(const Problem& p) : p_(p) {
    const Inputs& in = p.in;
    if (p.opt.use_gate_in_kernel) {
      if (in.A_log) {
        a_log_.resize(p.HV);
        load_elems<R>(*in.A_log, 0, in.A_log->stride(0), p.HV, a_log_.data());
      }
      const int64_t nb = p.HV * p.gate_width();
      dt_bias_.assign(nb, R(0));
      if (in.dt_bias) load_elems<R>(*in.dt_bias, 0, in.dt_bias->stride(0), nb, dt_bias_.data());
    }
  }

  // out[0..K) = scale * q[b, t, h] (after the optional l2norm).
  void q(int64_t b, int64_t t, int64_t h, R* out) const {
    load_row(p_.in.q, b, t, h, p_.K, out);
    finish_q(out);
  }

  void k(int64_t b, int64_t t, int64_t h, R* out) const {
    load_row(p_.in.k, b, t, h, p_.K, out);
    finish_k(out);
  }

  // The in-kernel preprocessing of a raw q / k row (for callers that load rows themselves).
  void finish_q(R* row) const {
    if (p_.opt.use_qk_l2norm_in_kernel) l2norm_inplace(row, p_.K);
    scale_inplace(row, p_.K, static_cast<R>(p_.scale));
  }
  void finish_k(R* row) const {
    if (p_.opt.use_qk_l2norm_in_kernel) l2norm_inplace(row, p_.K);
  }

  // For fp32 callers that load a chunk's rows [0, L) (row stride K) themselves. q_factors / k_factors: the
  // factor finish_q / finish_k would multiply each raw row by (l2norm's 1/sqrt(sum x^2 + 1e-6) and, for q,
  // the scale), for products that apply it instead. finish_q_rows / finish_k_rows: every row finished as
  // finish_q / finish_k would, with `f` (L floats) as scratch. The l2norm's sums run several rows side by side.
  // raw: the rows as R, or (R = float) as bf16 bit patterns, with the factors of their widened values.
  template <typename T>
  void q_factors(int64_t L, const T* raw, R* out) const {
    norm_factors(L, raw, out);
    for (int64_t i = 0; i < L; ++i) out[i] = out[i] * static_cast<R>(p_.scale);
  }
  template <typename T>
  void k_factors(int64_t L, const T* raw, R* out) const {
    norm_factors(L, raw, out);
  }
  void finish_q_rows(int64_t L, R* rows, R* f) const {
    l2norm_rows(L, rows, f);
    const R scale = static_cast<R>(p_.scale);
    simd::scale_rows(L, p_.K, rows, p_.K, &scale, 0, nullptr, rows, p_.K);
  }
  void finish_k_rows(int64_t L, R* rows, R* f) const { l2norm_rows(L, rows, f); }
  // finish_q_rows / finish_k_rows of rows given as bf16 bit patterns raw [L, K] (row stride ld: e.g. the input
  // tensor's own rows), into rows (fp32, row stride K): the factors from the bf16 rows' sums (the widened rows'
  // sums), then every row widened and multiplied in one pass (kernels/simd.h bf16_rows_scaled), with the bits
  // of widening and then finishing in place.
  void finish_q_rows_bf16(int64_t L, const uint16_t* raw, int64_t ld, float* rows, float* f) const {
    norm_factors(L, raw, f, ld);
    simd::bf16_rows_scaled(L, p_.K, raw, ld, f, static_cast<float>(p_.scale), rows, p_.K);
  }
  void finish_k_rows_bf16(int64_t L, const uint16_t* raw, int64_t ld, float* rows, float* f) const {
    norm_factors(L, raw, f, ld);
    simd::bf16_rows_scaled(L, p_.K, raw, ld, f, 1.0f, rows, p_.K);
  }

  void v(int64_t b, int64_t t, int64_t hv, R* out) const { load_row(p_.in.v, b, t, hv, p_.V, out); }

  R beta(int64_t b, int64_t t, int64_t hv) const {
    R out = 0;
    betas(b, t, 1, hv, &out);
    return out;
  }
  // beta of tokens [t0, t0 + L) for value head hv: one strided load for the chunk, not one per token.
  void betas(int64_t b, int64_t t0, int64_t L, int64_t hv, R* out) const {
    const TensorView& x = p_.in.beta;
    load_elems<R>(x, b * x.stride(0) + t0 * x.stride(1) + hv * x.stride(2), x.stride(1), L, out);
    if (!p_.opt.use_beta_sigmoid_in_kernel) return;
    for (int64_t i = 0; i < L; ++i) {
      const R s = sigmoid(out[i]);
      out[i] = p_.opt.allow_neg_eigval ? R(2) * s : s;
    }
  }

  // Everything the recurrence reads of token t for value head hv: q (scaled), k, v, gate; returns beta.
  R token(int64_t b, int64_t t, int64_t hv, R* q_out, R* k_out, R* v_out, R* g_out) const {
    const int64_t h = p_.qk_head(hv);
    q(b, t, h, q_out);
    k(b, t, h, k_out);
    v(b, t, hv, v_out);
    gate(b, t, hv, g_out);
    return beta(b, t, hv);
  }

  // out[0..gate_width) = the log decay of token t for value head hv.
  void gate(int64_t b, int64_t t, int64_t hv, R* out) const { gates(b, t, 1, hv, out); }
  // The same for tokens [t0, t0 + L): out [L, gate_width] (GDN's scalar gates in one strided load).
  void gates(int64_t b, int64_t t0, int64_t L, int64_t hv, R* out) const {
    const TensorView& x = p_.in.g;
    const int64_t w = p_.gate_width();
    if (p_.kind == Kind::kGdn) {
      load_elems<R>(x, b * x.stride(0) + t0 * x.stride(1) + hv * x.stride(2), x.stride(1), L, out);
    } else {
      load_rows(x, b, t0, L, hv, 0, w, out);
    }
    if (!p_.opt.use_gate_in_kernel) return;
    const R* bias = dt_bias_.data() + hv * w;
    if (p_.opt.lower_bound) {
      const R lb = static_cast<R>(*p_.opt.lower_bound);
      const R ea = a_log_.empty() ? R(1) : std::exp(a_log_[hv]);
      for (R* row = out; row < out + L * w; row += w) {
        for (int64_t d = 0; d < w; ++d) row[d] = gate_lower_bound(row[d], lb, ea, bias[d]);
      }
    } else {
      for (R* row = out; row < out + L * w; row += w) {
        for (int64_t d = 0; d < w; ++d) row[d] = gate_softplus(row[d], a_log_[hv], bias[d]);
      }
    }
  }

  // Columns [c0, c0 + n) of rows [t0, t0 + L) of head h, widened as load_row widens a row (out row stride n):
  // contiguous bf16 rows in one call at the view's row stride, anything else row by row.
  static void load_rows(const TensorView& x, int64_t b, int64_t t0, int64_t L, int64_t h, int64_t c0, int64_t n,
                        R* out) {
    const int64_t off = b * x.stride(0) + t0 * x.stride(1) + h * x.stride(2) + c0 * x.stride(3);
    if constexpr (sizeof(R) == 4) {
      if (x.dtype == DType::kBF16 && x.stride(3) == 1) {
        simd::bf16_to_f32_rows(L, n, static_cast<const uint16_t*>(x.data) + off, x.stride(1), out, n);
        return;
      }
    }
    for (int64_t i = 0; i < L; ++i) load_elems<R>(x, off + i * x.stride(1), x.stride(3), n, out + i * n);
  }

 private:
  // The in-kernel l2norm's multiplier of each of L rows (1 without it), and the rows multiplied by it.
  template <typename T>
  void norm_factors(int64_t L, const T* raw, R* out, int64_t ld = 0) const {
    if (p_.opt.use_qk_l2norm_in_kernel) {
      l2norm_factors(L, p_.K, raw, ld ? ld : p_.K, out);
    } else {
      std::fill(out, out + L, R(1));
    }
  }
  void l2norm_rows(int64_t L, R* rows, R* f) const {
    if (!p_.opt.use_qk_l2norm_in_kernel) return;
    l2norm_factors(L, p_.K, rows, p_.K, f);
    simd::scale_rows(L, p_.K, rows, p_.K, f, 1, nullptr, rows, p_.K);
  }

  static void load_row(const TensorView& x, int64_t b, int64_t t, int64_t h, int64_t n, R* out) {
    const int64_t off = b * x.stride(0) + t * x.stride(1) + h * x.stride(2);
    if constexpr (sizeof(R) == 4) {
      // Contiguous bf16 rows (KDA's gate rows, q, k, v on the recurrent paths) widen through the kernel set's
      // vectors: exact either way, and the generic loop measured 7 instructions an element.
      if (x.dtype == DType::kBF16 && x.stride(3) == 1) {
        simd::bf16_to_f32(n, static_cast<const uint16_t*>(x.data) + off, out);
        return;
      }
    }
    load_elems<R>(x, off, x.stride(3), n, out);
  }

  const Problem& p_;
  std::vector<R> a_log_, dt_bias_;
};

// Columns [c0, c0 + Vc) of the state of sequence row n, value head hv, as a k-first [K, Vc] matrix
// (either stored layout).
template <typename R>
inline void load_state(const Problem& p, const TensorView& s, int64_t n, int64_t hv, R* out, int64_t c0 = 0,
                       int64_t Vc = -1) {
  if (Vc < 0) Vc = p.V;
  const int64_t base = n * s.stride(0) + hv * s.stride(1);
  const int64_t sk = p.opt.state_v_first ? s.stride(3) : s.stride(2);  // along K
  const int64_t sv = p.opt.state_v_first ? s.stride(2) : s.stride(3);  // along V
  for (int64_t d = 0; d < p.K; ++d) load_elems<R>(s, base + d * sk + c0 * sv, sv, Vc, out + d * Vc);
}

template <typename R>
inline void store_state(const Problem& p, const TensorView& s, int64_t n, int64_t hv, const R* in, int64_t c0 = 0,
                        int64_t Vc = -1) {
  if (Vc < 0) Vc = p.V;
  const int64_t base = n * s.stride(0) + hv * s.stride(1);
  const int64_t sk = p.opt.state_v_first ? s.stride(3) : s.stride(2);
  const int64_t sv = p.opt.state_v_first ? s.stride(2) : s.stride(3);
  for (int64_t d = 0; d < p.K; ++d) store_elems<R>(s, base + d * sk + c0 * sv, sv, Vc, in + d * Vc);
}

// o[b, t, hv, c0 .. c0 + n) = row.
template <typename R>
inline void store_o_row(const TensorView& o, int64_t b, int64_t t, int64_t hv, int64_t n, const R* row,
                        int64_t c0 = 0) {
  store_elems<R>(o, b * o.stride(0) + t * o.stride(1) + hv * o.stride(2) + c0 * o.stride(3), o.stride(3), n, row);
}

}  // namespace hanpu
