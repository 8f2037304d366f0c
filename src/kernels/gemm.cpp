#include "kernels/gemm.h"

namespace hanpu {

namespace {

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

}  // namespace

void gemm_f32(Trans ta, Trans tb, int64_t M, int64_t N, int64_t Kd, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  scale_c(M, N, beta, C, ldc);
  if (M <= 0 || N <= 0 || Kd <= 0 || alpha == 0.0f) return;
  if (tb == Trans::kN) {
    // Rank-1 updates along the shared dimension: the inner loop runs over contiguous rows of B and C.
    for (int64_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      for (int64_t p = 0; p < Kd; ++p) {
        const float a = alpha * (ta == Trans::kN ? A[i * lda + p] : A[p * lda + i]);
        const float* b = B + p * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
    return;
  }
  // op(B) = B^T: C[i, j] is a dot product of a row of op(A) with row j of B.
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const float* b = B + j * ldb;
      float acc = 0.0f;
      if (ta == Trans::kN) {
        const float* a = A + i * lda;
        for (int64_t p = 0; p < Kd; ++p) acc += a[p] * b[p];
      } else {
        for (int64_t p = 0; p < Kd; ++p) acc += A[p * lda + i] * b[p];
      }
      C[i * ldc + j] += alpha * acc;
    }
  }
}

}  // namespace hanpu
