// Rounding GEMM operands to bf16 for the bf16 precision mode (ops.h Precision::kBf16), kept in fp32
// storage: a bf16 value is an fp32 whose low 16 bits are zero, so the fp32 kernels compute with exactly
// the rounded operands (every product of two bf16 values is exact in fp32). The portable bf16 GEMMs of
// every kernel set without a bf16 dot-product instruction are these roundings followed by the set's fp32
// GEMM.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/aligned.h"
#include "hanpu/tensor.h"
#include "kernels/kernel_set.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

// x rounded to the nearest bf16 (ties to even; NaN stays NaN), as an fp32.
inline float round_bf16(float x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }

// d[r * ldd + c] = round_bf16(src[r * lds + c]) for r < rows, c < cols: the reference set's round_bf16_rows.
inline void round_block_bf16(int64_t rows, int64_t cols, const float* src, int64_t lds, float* d, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) d[r * ldd + c] = round_bf16(src[r * lds + c]);
  }
}

// The same into a per-thread copy, sized to fit (contiguous rows).
inline void round_block_bf16(int64_t rows, int64_t cols, const float* src, int64_t lds, AlignedVector<float>* dst) {
  dst->resize(static_cast<std::size_t>(rows * cols));
  round_block_bf16(rows, cols, src, lds, dst->data(), cols);
}

using GemmFn = void (*)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                        bool acc, float* C, int64_t ldc);
// The two conversions the portable forms below run, as a kernel set supplies them (its round_bf16_rows and
// bf16_to_f32 entries: the reference set's loops, or a SIMD set's vectors, which give the same values), and
// its transposed copy (pack_transposed, unscaled here: exact values times 1, which changes none a product
// reads; a signalling NaN comes out quiet, as any product of it would).
using RoundRowsFn = void (*)(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
using WidenFn = void (*)(int64_t n, const uint16_t* src, float* dst);
using TransposeFn = void (*)(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                             float* dst, int64_t ldd);

// C = (acc ? C : 0) + op(bf16(A)) bf16(B) through the fp32 GEMM `f32` of the same form (gemm_nn, or
// gemm_tn with trans_a: A stored [Kd, M]): the operands are rounded into per-thread copies first.
inline void gemm_bf16_by_rounding(GemmFn f32, RoundRowsFn round, bool trans_a, int64_t M, int64_t N, int64_t Kd,
                                  const float* A, int64_t lda, const float* B, int64_t ldb, bool acc, float* C,
                                  int64_t ldc) {
  thread_local AlignedVector<float> a, b;
  const int64_t a_rows = trans_a ? Kd : M, a_cols = trans_a ? M : Kd;
  a.resize(static_cast<std::size_t>(a_rows * a_cols));
  b.resize(static_cast<std::size_t>(Kd * N));
  round(a_rows, a_cols, A, lda, a.data(), a_cols);
  round(Kd, N, B, ldb, b.data(), N);
  f32(M, N, Kd, a.data(), a_cols, b.data(), N, acc, C, ldc);
}

// The portable packed operand (KernelSet::pack_bf16): B rounded into [Kd, N] fp32 rows (ld = N).
inline void pack_bf16_by_rounding(RoundRowsFn round, int64_t Kd, int64_t N, const float* B, int64_t ldb,
                                  Bf16Operand* out) {
  round(Kd, N, B, ldb, out->reshape(Kd, N, N, Kd * N), N);
}

// C = (acc ? C : 0) + bf16(A) B[:Kd, :N] on a portably packed B through the fp32 GEMM `f32` (gemm_nn):
// the same rounded operands and fp32 GEMM as gemm_bf16_by_rounding, so the same bits.
inline void gemm_packed_bf16_by_rounding(GemmFn f32, RoundRowsFn round, int64_t M, int64_t N, int64_t Kd,
                                         const float* A, int64_t lda, const Bf16Operand& B, bool acc, float* C,
                                         int64_t ldc) {
  thread_local AlignedVector<float> a;
  a.resize(static_cast<std::size_t>(M * Kd));
  round(M, Kd, A, lda, a.data(), Kd);
  f32(M, N, Kd, a.data(), Kd, B.data.data(), B.ld, acc, C, ldc);
}

using PackFn = void (*)(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out);
using ResidualFn = void (*)(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl);

// KernelSet::pack_bf16_split as its definition: the low term into a per-thread buffer, then both packings.
template <PackFn Pack, ResidualFn Residual>
void pack_bf16_split_by_parts(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo) {
  thread_local AlignedVector<float> low;
  low.resize(static_cast<std::size_t>(Kd * N));
  Residual(Kd, N, X, ldx, low.data(), N);
  Pack(Kd, N, X, ldx, hi);
  Pack(Kd, N, low.data(), N, lo);
}

using GemmPackedFn = void (*)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                              bool acc, float* C, int64_t ldc);

// KernelSet::lower_times_bf16 on a set's packed product: row blocks of kTrilBlock up to the diagonal (block
// [r0, r1) reads A's columns [0, r1)), each block's terms in order, accumulated through C.
template <GemmPackedFn Packed>
void lower_times_bf16_by_blocks(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* t, bool acc, float* C,
                                int64_t ldc) {
  for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {
    const int64_t r1 = std::min(L, r0 + kTrilBlock);
    for (int k = 0; k < nterms; ++k) {
      Packed(r1 - r0, N, r1, t[k].A + r0 * t[k].lda, t[k].lda, *t[k].B, acc || k > 0, C + r0 * ldc, ldc);
    }
  }
}

// The portable forms for bf16 rows (KernelSet::pack_bf16_rows_t, gemm_bf16_rows, gemm_bf16_rows_tn):
// widened to fp32, which is exact, so they are the rounding forms above on the widened operands (the row
// factors their own pass, with_row_scale). For
// pack_bf16_rows_t X [N, Kd] is widened row by row and then transposed into B = X^T [Kd, N].
inline void pack_bf16_rows_t_by_widening(WidenFn widen, TransposeFn transpose, int64_t N, int64_t Kd,
                                         const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  thread_local AlignedVector<float> x;
  x.resize(static_cast<std::size_t>(N * Kd));
  for (int64_t n = 0; n < N; ++n) widen(Kd, X + n * ldx, x.data() + n * Kd);
  transpose(N, Kd, x.data(), Kd, nullptr, 1, out->reshape(Kd, N, N, Kd * N), N);
}

// C[r, :] *= s_r for r < M (RowScale): one fp32 multiply per element, as any set's scale_rows makes it.
inline void scale_rows_by(RowScale rs, int64_t M, int64_t N, float* C, int64_t ldc) {
  if (!rs.s) return;
  for (int64_t r = 0; r < M; ++r) {
    const float f = rs.s[r * rs.stride];
    for (int64_t c = 0; c < N; ++c) C[r * ldc + c] *= f;
  }
}

// A rows product with its row factors as their definition: the prior C scaled before an accumulating
// product, or the product scaled after a plain one (RowScale).
template <typename Product>
void with_row_scale(RowScale rs, bool acc, int64_t M, int64_t N, float* C, int64_t ldc, Product product) {
  if (acc) scale_rows_by(rs, M, N, C, ldc);
  product();
  if (!acc) scale_rows_by(rs, M, N, C, ldc);
}

inline void gemm_bf16_rows_by_widening(GemmFn f32, WidenFn widen, int64_t M, int64_t N, int64_t Kd,
                                       const uint16_t* A, int64_t lda, const Bf16Operand& B, bool acc, float* C,
                                       int64_t ldc, RowScale rs) {
  thread_local AlignedVector<float> a;
  a.resize(static_cast<std::size_t>(M * Kd));
  for (int64_t r = 0; r < M; ++r) widen(Kd, A + r * lda, a.data() + r * Kd);
  with_row_scale(rs, acc, M, N, C, ldc, [&] { f32(M, N, Kd, a.data(), Kd, B.data.data(), B.ld, acc, C, ldc); });
}

// KernelSet::gemm_bf16_rows_tn's portable form: X [Kd, M] widened row by row, then the set's fp32 gemm_tn
// (`tn`) on it and each packed B_t, whose rows are B_t's rounded source (gemm_bf16_by_rounding's operands and
// GEMM), term after term.
inline void gemm_bf16_rows_tn_by_widening(GemmFn tn, WidenFn widen, int64_t M, int64_t N, int64_t Kd,
                                          const uint16_t* X, int64_t ldx, int nterms, const Bf16Operand* const* B,
                                          bool acc, float* C, int64_t ldc, RowScale rs) {
  thread_local AlignedVector<float> x;
  x.resize(static_cast<std::size_t>(Kd * M));
  for (int64_t r = 0; r < Kd; ++r) widen(M, X + r * ldx, x.data() + r * M);
  with_row_scale(rs, acc, M, N, C, ldc, [&] {
    for (int t = 0; t < nterms; ++t) tn(M, N, Kd, x.data(), M, B[t]->data.data(), B[t]->ld, acc || t > 0, C, ldc);
  });
}

}  // namespace hanpu
