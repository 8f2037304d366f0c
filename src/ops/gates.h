// Scalar gate, beta and norm functions of the operator contract (DESIGN.md §1), for float and double.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <cstdint>

#include "kernels/simd.h"

namespace hanpu {

// softplus(x) = log(1 + e^x), the identity above 20 as in FLA's kernels.
template <typename R>
inline R softplus(R x) {
  return x > R(20) ? x : std::log1p(std::exp(x));
}

template <typename R>
inline R sigmoid(R x) {
  return R(1) / (R(1) + std::exp(-x));
}

// In-kernel gate: -exp(A_log) * softplus(a + dt_bias).
template <typename R>
inline R gate_softplus(R a, R a_log, R dt_bias) {
  return -std::exp(a_log) * softplus(a + dt_bias);
}

// KDA lower-bound gate: lower_bound * sigmoid(exp(A_log) * (a + dt_bias)); without A_log the factor is 1.
template <typename R>
inline R gate_lower_bound(R a, R lower_bound, R exp_a_log, R dt_bias) {
  return lower_bound * sigmoid(exp_a_log * (a + dt_bias));
}

// rsqrt(sum x^2 + 1e-6): the factor of the l2norm of use_qk_l2norm_in_kernel. The sum accumulates in
// double; the fp32 paths sum the squares in SIMD fp32 lanes (reduced in double): the same rsqrt to ~1e-7.
template <typename R>
inline R l2norm_factor(const R* x, int64_t n) {
  double ss = 0;
  if constexpr (sizeof(R) == 4) {
    ss = simd::sum_squares(n, x);
  } else {
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  }
  return static_cast<R>(1.0 / std::sqrt(ss + 1e-6));
}

// l2norm_factor (fp32) of rows [0, rows) of x (row stride ldx) at once: the kernel set sums several rows'
// squares side by side, each row in sum_squares's order, so every factor is l2norm_factor's. x: fp32 rows,
// or bf16 rows (bit patterns), whose factors are those of their widened values.
template <typename T>
inline void l2norm_factors(int64_t rows, int64_t n, const T* x, int64_t ldx, float* out) {
  constexpr int64_t kBatch = 64;
  double ss[kBatch];
  for (int64_t r0 = 0; r0 < rows; r0 += kBatch) {
    const int64_t m = std::min(kBatch, rows - r0);
    if constexpr (std::is_same_v<T, uint16_t>) {
      simd::sum_squares_rows_bf16(m, n, x + r0 * ldx, ldx, ss);
    } else {
      simd::sum_squares_rows(m, n, x + r0 * ldx, ldx, ss);
    }
    for (int64_t r = 0; r < m; ++r) out[r0 + r] = static_cast<float>(1.0 / std::sqrt(ss[r] + 1e-6));
  }
}

// x[i] <- x[i] * f for i < n. The fp32 paths multiply through the kernel set's SIMD (the same products as
// the scalar loop, which the portable build compiles to 4-wide SSE2; measured, a GDN chunk's load with
// l2norm, cache-resident: 10.2 -> 9.5 us).
template <typename R>
inline void scale_inplace(R* x, int64_t n, R f) {
  if constexpr (sizeof(R) == 4) {
    simd::scale_rows(1, n, x, n, &f, 0, nullptr, x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  }
}

// x <- x * l2norm_factor(x).
template <typename R>
inline void l2norm_inplace(R* x, int64_t n) {
  scale_inplace(x, n, l2norm_factor(x, n));
}

}  // namespace hanpu
