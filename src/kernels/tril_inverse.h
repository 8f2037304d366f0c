// Inverse of a unit lower-triangular matrix: T = (I + A)^-1 for strictly lower-triangular A (n x n).
// Only the strictly lower part of A is read. T is written whole (upper part 0, diagonal 1).
//
// Blocked as in FLA's solve_tril: 16 x 16 diagonal blocks by forward substitution,
//   T_ij = -A_ij - sum_{j<r<i} A_ir T_rj,
// then off-diagonal blocks row-block by row-block with GEMM tiles,
//   T_IJ = -T_II * sum_{J<=R<I} A_IR T_RJ.
#pragma once

#include <cstdint>

namespace hanpu {

inline constexpr int64_t kTrilBlock = 16;

void tril_unit_inverse(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt);

// One diagonal block (m x m, m <= kTrilBlock) by forward substitution, the reference kernel set's entry:
//   T_ij = -(A_ij + sum_{j<r<i} A_ir T_rj)  for j < i,  T_ii = 1,
// the sum in ascending r, each product rounded before it is added (this file is built without floating
// contraction, so a compiler does not fuse them on targets with FMA). T's upper part is not written.
void tril_block_inverse(int64_t m, const float* A, int64_t lda, float* T, int64_t ldt);

}  // namespace hanpu

namespace hanpu {

// The same inverse with the off-diagonal merges on the SIMD GEMM (kernels/simd.h); scratch holds
// kTrilBlock * n floats. Returns the multiply-adds it issued.
int64_t tril_unit_inverse_simd(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt, float* scratch);

}  // namespace hanpu
