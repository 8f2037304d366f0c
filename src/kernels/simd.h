// SIMD building blocks of the CPU engine, compiled with Highway for every x86 target (SSSE3, SSE4, AVX2,
// AVX-512) and the scalar baseline. These functions call the active kernel set (kernels/kernel_set.h),
// chosen once per process; every set is a table of these entries with a scalar reference.
//
// Determinism: a GEMM output column is computed the same way (one fused multiply-add chain over the shared
// dimension, in order) whichever column block it falls in, as long as callers split the columns of a
// product at multiples of gemm_column_block(). The engine relies on this for results that are
// bit-identical for any thread count.
#pragma once

#include <cstdint>

#include "kernels/kernel_set.h"  // Bf16Operand, Bf16LowerTerm, RowScale

namespace hanpu::simd {

// Name of the Highway target in use, e.g. "AVX3" (AVX-512) or "AVX2".
const char* target_name();

// Columns per register block (two vectors of the chosen target): column splits must align to it.
int64_t gemm_column_block();

// C[M, N] = (accumulate ? C : 0) + A[M, Kd] * B[Kd, N]. Row-major; lda, ldb, ldc in elements.
// B's rows must be contiguous (transposed operands are packed first by the caller).
void gemm_nn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc);

// C[M, N] = (accumulate ? C : 0) + A^T B with A stored [Kd, M] row-major (lda >= M): the transposed
// operand is read in place, no packing. Same per-column arithmetic as gemm_nn.
void gemm_tn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc);

// C = diag(s) C + op(A) B (kernels/kernel_set.h gemm_scaled_acc): op(A) = A [M, Kd], or A^T for A stored
// [Kd, M] with trans_a; the rows of the prior C scaled by rs (none where rs.s is null), then the product
// accumulated: the bits of scale_rows and then gemm_nn / gemm_tn, in one pass of C.
void gemm_scaled_acc(bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B,
                     int64_t ldb, float* C, int64_t ldc, RowScale rs);

// gemm_nn / gemm_tn with both operands rounded to bf16 on the way in and fp32 accumulation (the bf16
// precision mode): on AVX512-BF16 dot products where the CPU has them, else on the rounded fp32 operands.
void gemm_nn_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                  bool accumulate, float* C, int64_t ldc);
void gemm_tn_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                  bool accumulate, float* C, int64_t ldc);

// The bf16 GEMM with a right operand packed once for several products (kernels/kernel_set.h, Bf16Operand):
// pack_bf16 packs B [Kd, N]; gemm_packed_bf16 is gemm_nn_bf16 on its rows [0, Kd) and columns [0, N), bit
// for bit. A call outside the packed operand (N > B.N, Kd > B.Kd, or an odd Kd < B.Kd) is a programming
// error: it aborts with a message.
void pack_bf16(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out);
void gemm_packed_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                      bool accumulate, float* C, int64_t ldc);
// gemm_packed_bf16 carrying a filler's vector steps between its tile steps where the set has a matrix engine
// (kernels/kernel_set.h VectorFiller; none elsewhere): C the same bits; then the rest of the filler's steps
// here, so that the filler is done on return.
void gemm_packed_bf16_carrying(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                               bool accumulate, float* C, int64_t ldc, VectorFiller* filler);

// C[L, N] = (acc ? C : 0) + sum_t bf16(A_t) B_t for lower-triangular A_t [L, L] and B_t packed [L, N]
// (kernels/kernel_set.h lower_times_bf16): gemm_packed_bf16 per row block and term, up to the sign of zeros.
void lower_times_bf16(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool accumulate, float* C,
                      int64_t ldc);

// The same for operands already in bf16 (rows of bf16 bit patterns): B = X^T packed from X [N, Kd], the
// packed product with A given as bf16 rows, and with A = X^T for bf16 rows X [Kd, M] (kernels/kernel_set.h);
// bit-identical to the forms above (gemm_tn_bf16 for the last) on the widened operands; the two products
// apply C's row factors rs in registers (kernels/kernel_set.h RowScale: the prior C's rows when accumulating,
// the products' otherwise).
void pack_bf16_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out);
void gemm_bf16_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                    bool accumulate, float* C, int64_t ldc, RowScale rs = {});
void gemm_bf16_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                       const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs = {});

// Row conversions between bf16 bit patterns and fp32: widening is exact; narrowing rounds to nearest, ties to
// even, and keeps NaN a (quiet) NaN, as f32_to_bf16_bits (hanpu/tensor.h) does element by element.
void bf16_to_f32(int64_t n, const uint16_t* src, float* dst);
void f32_to_bf16(int64_t n, const float* src, uint16_t* dst);

// lo[r * ldl + c] = x[r * ldx + c] - round_bf16(x[r * ldx + c]) for r < rows, c < cols: the low term of the
// two-term split x = hi + lo, hi = bf16(x). The difference is exact in fp32 (hi is x with its significand cut to
// 8 bits, so x - hi has at most 16 significant bits at or below hi's exponent), so a bf16 product that reads
// hi and bf16(lo) sees x to about 16 significant bits (relative error <= 2^-16) instead of 8 (<= 2^-8). A
// non-finite x gives a non-finite lo.
void bf16_residual(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl);

// Both packings of a two-term split X [Kd, N]: hi = pack_bf16(X), lo = pack_bf16 of bf16_residual(X), bit for
// bit, in one pass where the set can (kernels/kernel_set.h pack_bf16_split).
void pack_bf16_split(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo);

// The bf16 step's fused products (kernels/kernel_set.h): R = diag(beta) (V - diag(s) (A B)) straight into
// R's split packing (A bf16 rows [M, Kd], B packed, V [M, N] contiguous; s null: no row factors), and X =
// sum_t bf16(A_t) B_t (lower triangular, not accumulating) straight into X's split packing and diag(scale o
// rowscale) X packed (scaled null: not formed). Each is its unfused composition bit for bit; the AMX set never
// stores R or X.
void residual_split_bf16_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                              const float* s, const float* beta, const float* V, Bf16Operand* hi, Bf16Operand* lo);
void lower_times_split_bf16(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, Bf16Operand* hi,
                            Bf16Operand* lo, const float* scale, const float* rowscale, Bf16Operand* scaled);
// C = diag(s) C (accumulating) + sum_t bf16(op(A)) B_t for 1 to 3 packed B_t read by one left operand (A
// [M, Kd], or stored [Kd, M] with trans_a): the state update's terms in one pass of C (kernels/kernel_set.h).
void gemm_terms_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, bool trans_a, int nterms,
                     const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs = {});

// dst = bf16(src o scale) as bf16 rows (scale_rows' products, no rowscale), rounded as this set's bf16 products
// round their operands: gemm_bf16_rows on them is gemm_packed_bf16 on scale_rows' output (kernel_set.h).
void scale_rows_bf16(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     uint16_t* dst, int64_t ldd);

// The diagonal blocks of T = (I + A)^-1 for an n x n A (strictly lower, row stride lda; T row stride ldt):
// block b covers rows and columns [b kTrilBlock, min(n, (b + 1) kTrilBlock)), each the forward substitution
// of kernels/tril_inverse.h tril_block_inverse on its own block of A, with its bits; only each block's lower
// part (diagonal included) of T is written.
void tril_diagonal_blocks(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt);

// G[i * w + d] = sum_{s <= i} g[s * w + d] in double (kernels/decay.h gate_cumsum: each channel in token
// order from 0.0, so the same bits), every channel of a row at once.
void gate_cumsum(int64_t L, int64_t w, const float* g, double* G);

// KDA's decay factors of a chunk from its per-channel gates g [L, w] (kernels/kernel_set.h kda_gate_factors):
// the step factors ga = exp(g), eg_i = exp(G_i), eg_last_i = exp(G_last - G_i) (every kDecayAnchorRows-th row an
// exp, from the top for eg and from the last row for eg_last, the rows between running products of ga) and
// g_last = exp(G_last), G the gates' cumsum in double (gate_cumsum), each exponent rounded to float.
void kda_gate_factors(int64_t L, int64_t w, const float* g, float* ga, float* eg, float* eg_last, float* g_last);

// GDN's decay-masked scores of a chunk, in place over rows i < L and columns j < L (row stride ld), from the
// chunk's gate cumsums G (double): with m_ij ~ exp(G_i - G_j) cf_j for j <= i,
//   a_ij <- a_ij * (ra_i * m_ij) for j < i, 0 for j >= i;   p_ij <- p_ij * (rp_i * m_ij) for j <= i, 0 beyond
// (cf, ra, rp null: 1; a or p null: not formed). m comes from few exps, in 16-row blocks (kIntraBlock, the
// split KDA's intra-chunk scores use), f(x) the double x rounded to float and exp as the set's exp_f32:
//   left of row i's block (j < i0, its first row): a_ij <- a_ij * ((ra_i e_i) (d_j cf_j)) with
//     e_i = exp(f(G_i - G_i0)) and d_j = exp(f(G_i0 - G_j)), both <= 1 for non-positive gates (log decays);
//   inside the block (i0 <= j <= i): m_ij = r_ij cf_j, where every kDecayAnchorRows-th row from i0 (an
//     anchor) has r_ij = exp(f(G_i - G_j)) and the rows after it the running products r_ij = r_(i-1)j ga_i of
//     the step factors ga_i = exp(f(G_i - G_(i-1))), with r_jj = 1 where a product starts (j past the anchor).
// Why: one exp per entry made this the largest vector pass of a GDN step; a product adds half an ulp, at most
// three in a row. (Gates of both signs whose cumsum swings by more than ~88 inside 16 rows can overflow one
// factor where their product is finite; log decays, which both models make, never do.)
void decay_mask(int64_t L, const double* G, const float* cf, const float* ra, const float* rp, float* a, float* p,
                int64_t ld);

// out[r * cols + d] = exp(float(Ga[r * sa + d] - Gb[r * sb + d])) for r < rows, d < cols: decay factors from
// gate cumsums, the difference taken in double (Gb null: 0; a stride of 0 repeats one row).
void exp_diff(int64_t rows, int64_t cols, const double* Ga, int64_t sa, const double* Gb, int64_t sb, float* out);

// sum x[i]^2, i < n (fp32 lanes, reduced in double).
double sum_squares(int64_t n, const float* x);

// out[r] = sum_squares(n, x + r * ldx) for r < rows, the same bits (sum_squares is its one-row case): four
// rows' independent chains side by side (one row's chain is one dependent FMA per vector).
void sum_squares_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, double* out);
// The same sums of bf16 rows (bit patterns), bit for bit those of their widened values.
void sum_squares_rows_bf16(int64_t rows, int64_t n, const uint16_t* x, int64_t ldx, double* out);

// y[i] = exp(x[i]), i < n (Highway's vectorised exp; a few ulp, 0 below about -87).
void exp_f32(int64_t n, const float* x, float* y);

// dst[r, c] = src[r, c] * scale[r * sw + (sw > 1 ? c : 0)] * (rowscale ? rowscale[r] : 1) for r < rows,
// c < cols: one factor for all (sw == 0), per row (sw == 1) or per element (sw == cols), optionally times
// a per-row factor.
// dst may equal src.
void scale_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                const float* rowscale, float* dst, int64_t ldd);

// out[i, j] = beta[i] * (v[i, j] - ks[i, j]) over contiguous [rows, cols] matrices.
void beta_residual(int64_t rows, int64_t cols, const float* beta, const float* v, const float* ks, float* out);

// One decode token, in place, on a state with contiguous rows (row stride lds), DESIGN.md §1:
//   S <- diag(decay) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q     (decay: K factors)
// k-first S [K, V]; v-first S [V, K].
void decode_k_first(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                    const float* v, float beta, float* o);
void decode_v_first(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                    const float* v, float beta, float* o);

// Row i's pairs inside a KDA diagonal block (kernels/decay.cpp), the block's rows j < rows (the last is
// row i itself), with X [rows, cols] (row stride ldx) the decayed keys k_j o exp(G_{i-1} - G_j) of the rows
// before i and k_i in the last row:
//   X_j <- X_j o r   for j < rows - 1 (r: exp(G_i - G_{i-1}) per channel; null: no step),
//   out_a[j] = X_j . a,  out_b[j] = X_j . b
// in one pass over X: each row is stepped and dotted while it is in registers.
void decayed_dots2(int64_t rows, int64_t cols, float* X, int64_t ldx, const float* r, const float* a, const float* b,
                   float* out_a, float* out_b);

// Running products of rows: out_r = out_{r-1} o f_r for r = 1 .. n - 1 (row r of out at out + r * ldo, of f at
// f + r * ldf; either stride may be negative, for a chain running up the rows), one fp32 multiply per element:
// the decay factors that are running products of step factors (exec/chunk_kernels.h decay_factors, KDA's
// intra-chunk scores), a chain in one call instead of a scale_rows call a row.
void chain_products(int64_t n, int64_t cols, float* out, int64_t ldo, const float* f, int64_t ldf);

// dst[r, c] = (widened src[r, c] * f[r]) * s for bf16 rows src (row stride lds): widening rows and then scaling
// them by their factors and by s (two scale_rows passes), in one pass and with their bits (an l2norm's rows
// and q's scale, ops/rows.h finish_q_rows_bf16).
void bf16_rows_scaled(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, const float* f, float s, float* dst,
                      int64_t ldd);

// bf16_to_f32 / f32_to_bf16 on `rows` rows of `cols` (row strides lds, ldd: e.g. a head's rows in a [B, T, H, D]
// tensor) in one call, with their bits: a chunk's loads and stores without a call a row.
void bf16_to_f32_rows(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, float* dst, int64_t ldd);
void f32_to_bf16_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, uint16_t* dst, int64_t ldd);

// Runs `iters` rounds of twelve independent register-resident FMA chains; returns the flops executed.
// Timing it on every thread at once gives the machine's fp32 FMA peak (bench/peak).
double fma_peak_kernel(int64_t iters);

}  // namespace hanpu::simd
