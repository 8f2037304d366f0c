// Vector building blocks of the chunkwise form: gate cumsums, decay masks, and KDA's per-channel decayed
// intra-chunk scores. Gate cumsums are kept in double: a fp32 cumsum absorbs small gates next to large
// ones (a -1000 entry leaves later gates with ~6e-5 absolute error), and the decay factors below are
// differences of cumsums. Every exponent formed here is G_i - G_j with i >= j, or G_n - G_j around a
// reference row n with j <= n, so it is <= 0 whenever the gates are <= 0: a gate of -1000 underflows
// to 0 and never produces inf or NaN.
#pragma once

#include <cstdint>

namespace hanpu {

// G[i * w + d] = sum_{s <= i} g[s * w + d] for i < L, d < w (chunk-local inclusive cumsum).
void gate_cumsum(int64_t L, int64_t w, const float* g, double* G);

// Scalar gates (GDN): X_ij <- X_ij * exp(G_i - G_j) * rowscale_i for j < i (or j <= i with
// include_diag), and 0 above. rowscale may be null (1). X is L x L with leading dimension ldx.
void decay_mask_scalar(int64_t L, const double* G, const float* rowscale, bool include_diag, float* X,
                       int64_t ldx);

// kernels/simd.h decay_mask's definition entry by entry, each factor from its own exps and products in the
// definition's order, with `exp` for exp_f32: the reference kernel set's form (exp = its exp_f32), and the bits
// a set's own form must give with that set's exp_f32 (tested).
using ExpF32Fn = void (*)(int64_t n, const float* x, float* y);
void decay_mask_by_entries(ExpF32Fn exp, int64_t L, const double* G, const float* cf, const float* ra,
                           const float* rp, float* a, float* p, int64_t ld);

// Per-channel gates (KDA), G is L x K:
//   A_ij = beta_i * sum_d k_id k_jd exp(G_id - G_jd)   for i > j, 0 otherwise
//   P_ij =          sum_d q_id k_jd exp(G_id - G_jd)   for i >= j, 0 otherwise
// Rows are processed in sub-blocks of kIntraBlock. Columns left of a sub-block starting at row n use
// the split exp(G_id - G_jd) = exp(G_id - G_nd) * exp(G_nd - G_jd) (both factors <= 1) so they are GEMM
// tiles; pairs inside the sub-block are summed exactly. scratch holds (L + 2 * kIntraBlock) * K floats.
inline constexpr int64_t kIntraBlock = 16;
// Running products of step factors (a decay e^(G_i - G_j) as e^(G_(i-1) - G_j) e^(g_i)) restart from an exp
// every kDecayAnchorRows rows, so at most three products (1.5 ulp) separate a factor from an exp
// (exec/chunk_kernels.h decay_factors, kernels/simd.h decay_mask).
inline constexpr int64_t kDecayAnchorRows = 4;
void kda_intra_scores(int64_t L, int64_t K, const float* Q, const float* Kc, const double* G, const float* beta,
                      float* A, float* P, int64_t ld, float* scratch);

// The same A and P (same sub-block split) from the rows' step factors ga_i = exp(G_i - G_{i-1}) [L, K] (row 0
// unused; exec/chunk_kernels.h decay_factors) instead of G: every decay factor a running product of them (no
// exp), the off-diagonal blocks on the SIMD GEMM and the in-block pairs as row dots, through the active kernel
// set (kernels/simd.h). The split's right factors k_j o exp(G_n - G_j) are carried from one sub-block start to
// the next (times exp(G_n - G_{n-B}) per channel, a product of factors <= 1), so each sub-block makes only the
// previous one's B rows fresh.
// Returns the flops executed. scratch holds kda_intra_scores_simd_scratch(L, K) floats. (Also in the bf16
// precision mode these GEMMs stay fp32: their 16-row blocks are a small share of the step, and rounding
// them measured o 3.50e-3 -> 3.76e-3 against fp64 at no measurable gain; on the Intel Xeon with AMX, on the
// tiles, the scores part went 19.8 -> 19.0-19.3 us.)
double kda_intra_scores_simd(int64_t L, int64_t K, const float* Q, const float* Kc, const float* ga, const float* beta,
                             float* A, float* P, int64_t ld, float* scratch);
inline int64_t kda_intra_scores_simd_scratch(int64_t L, int64_t K) { return L * K + 4 * kIntraBlock * K; }

}  // namespace hanpu
