#include "kernels/tril_inverse.h"

#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/simd.h"

namespace hanpu {

void tril_block_inverse(int64_t m, const float* A, int64_t lda, float* T, int64_t ldt) {
  for (int64_t i = 0; i < m; ++i) {
    float* ti = T + i * ldt;
    const float* ai = A + i * lda;
    for (int64_t j = 0; j < i; ++j) {
      float acc = ai[j];
      for (int64_t r = j + 1; r < i; ++r) acc += ai[r] * T[r * ldt + j];
      ti[j] = -acc;
    }
    ti[i] = 1.0f;
  }
}

void tril_unit_inverse(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt) {
  for (int64_t i = 0; i < n; ++i) std::fill(T + i * ldt, T + i * ldt + n, 0.0f);
  const int64_t nb = (n + kTrilBlock - 1) / kTrilBlock;
  float X[kTrilBlock * kTrilBlock];
  for (int64_t bi = 0; bi < nb; ++bi) {
    const int64_t i0 = bi * kTrilBlock, i1 = std::min(n, i0 + kTrilBlock), mi = i1 - i0;
    tril_block_inverse(mi, A + i0 * lda + i0, lda, T + i0 * ldt + i0, ldt);
    for (int64_t bj = bi - 1; bj >= 0; --bj) {
      const int64_t j0 = bj * kTrilBlock, mj = kTrilBlock;  // blocks left of the diagonal are full
      // X = A[i0:i1, j0:i0] * T[j0:i0, j0:j0+mj]   (T is lower triangular, so rows j0..i0 cover R = J..I-1)
      gemm_f32(Trans::kN, Trans::kN, mi, mj, i0 - j0, 1.0f, A + i0 * lda + j0, lda, T + j0 * ldt + j0, ldt, 0.0f, X,
               kTrilBlock);
      // T[I, J] = -T[I, I] * X
      gemm_f32(Trans::kN, Trans::kN, mi, mj, mi, -1.0f, T + i0 * ldt + i0, ldt, X, kTrilBlock, 0.0f,
               T + i0 * ldt + j0, ldt);
    }
  }
}

int64_t tril_unit_inverse_simd(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt, float* scratch) {
  // The upper part is zero; the diagonal blocks' lower parts and then the blocks left of them are written.
  for (int64_t i = 0; i + 1 < n; ++i) std::fill(T + i * ldt + i + 1, T + i * ldt + n, 0.0f);
  simd::tril_diagonal_blocks(n, A, lda, T, ldt);
  const int64_t nb = (n + kTrilBlock - 1) / kTrilBlock;
  int64_t macs = 0;
  for (int64_t bi = 0; bi < nb; ++bi) {
    const int64_t i0 = bi * kTrilBlock, i1 = std::min(n, i0 + kTrilBlock), mi = i1 - i0;
    macs += mi * mi * mi / 6;
    if (bi == 0) continue;
    // All blocks left of the diagonal at once: X = A[I, 0:i0] * T[0:i0, 0:i0] (T lower triangular, so
    // column block J only gathers rows R >= J), then T[I, 0:i0] = -T[I, I] * X.
    simd::gemm_nn(mi, i0, i0, A + i0 * lda, lda, T, ldt, false, scratch, i0);
    for (int64_t k = 0; k < mi * i0; ++k) scratch[k] = -scratch[k];
    simd::gemm_nn(mi, i0, mi, T + i0 * ldt + i0, ldt, scratch, i0, false, T + i0 * ldt, ldt);
    macs += mi * i0 * i0 + mi * i0 * mi;
  }
  return macs;
}

}  // namespace hanpu
