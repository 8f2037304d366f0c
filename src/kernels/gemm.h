// The scalar single-precision GEMM, used by the chunk path (ops/chunk.cpp) and as the reference kernel
// set's GEMM (kernels/kernel_set.h): C[M,N] = alpha * op(A)[M,Kd] * op(B)[Kd,N] + beta * C, row-major
// operands with leading dimensions (in elements). op(X) is X or X^T. beta == 0 overwrites C without reading it,
// so C may hold garbage (even NaN) on entry. fp32 accumulation.
#pragma once

#include <cstdint>

namespace hanpu {

enum class Trans { kN, kT };

void gemm_f32(Trans ta, Trans tb, int64_t M, int64_t N, int64_t Kd, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace hanpu
