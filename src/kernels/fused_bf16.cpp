// The default forms of the kernel sets' fused bf16 entries (kernels/kernel_set.h): the set's own entries in
// sequence, through per-thread fp32 buffers. They define the fused entries' values; a set that fuses them
// (kernels/gemm_amx.cpp) is tested against these bit for bit (tests/test_kernel_sets.cpp).
#include <cstdint>

#include "core/aligned.h"
#include "kernels/bf16_round.h"
#include "kernels/kernel_set.h"

namespace hanpu {

namespace {

// A per-thread buffer of n floats (grown, never shrunk).
float* scratch(AlignedVector<float>* buf, int64_t n) {
  if (static_cast<int64_t>(buf->size()) < n) buf->resize(static_cast<std::size_t>(n));
  return buf->data();
}

}  // namespace

void residual_split_bf16_rows_by_parts(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const uint16_t* A,
                                       int64_t lda, const Bf16Operand& B, const float* s, const float* beta,
                                       const float* V, Bf16Operand* hi, Bf16Operand* lo) {
  thread_local AlignedVector<float> ks_buf, r_buf;
  float* ks = scratch(&ks_buf, M * N);
  float* r = scratch(&r_buf, M * N);
  self.gemm_bf16_rows(M, N, Kd, A, lda, B, false, ks, N, RowScale{s, 1});
  self.beta_residual(M, N, beta, V, ks, r);
  self.pack_bf16_split(M, N, r, N, hi, lo);
}

void lower_times_split_bf16_by_parts(const KernelSet& self, int64_t L, int64_t N, int nterms,
                                     const Bf16LowerTerm* terms, Bf16Operand* hi, Bf16Operand* lo, const float* scale,
                                     const float* rowscale, Bf16Operand* scaled) {
  thread_local AlignedVector<float> x_buf, y_buf;
  float* x = scratch(&x_buf, L * N);
  self.lower_times_bf16(L, N, nterms, terms, false, x, N);
  self.pack_bf16_split(L, N, x, N, hi, lo);
  if (!scaled) return;
  float* y = scratch(&y_buf, L * N);
  self.scale_rows(L, N, x, N, scale, 1, rowscale, y, N);
  self.pack_bf16(L, N, y, N, scaled);
}

void gemm_terms_bf16_by_parts(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda,
                              bool trans_a, int nterms, const Bf16Operand* const* B, bool acc, float* C, int64_t ldc,
                              RowScale rs) {
  if (M <= 0 || N <= 0) return;
  if (acc) scale_rows_by(rs, M, N, C, ldc);
  thread_local AlignedVector<float> a_buf;
  const float* a = A;
  int64_t la = lda;
  if (trans_a) {
    a = scratch(&a_buf, M * Kd);
    self.pack_transposed(Kd, M, A, lda, nullptr, 1, a_buf.data(), Kd);
    la = Kd;
  }
  for (int t = 0; t < nterms; ++t) self.gemm_packed_bf16(M, N, Kd, a, la, *B[t], acc || t > 0, C, ldc);
  if (!acc) scale_rows_by(rs, M, N, C, ldc);
}

void scale_rows_bf16_by_parts(const KernelSet& self, int64_t rows, int64_t cols, const float* src, int64_t lds,
                              const float* scale, int64_t sw, uint16_t* dst, int64_t ldd) {
  thread_local AlignedVector<float> x_buf;
  float* x = scratch(&x_buf, rows * cols);
  self.scale_rows(rows, cols, src, lds, scale, sw, nullptr, x, cols);
  for (int64_t r = 0; r < rows; ++r) self.f32_to_bf16(cols, x + r * cols, dst + r * ldd);
}

void gemm_packed_bf16_carrying_nothing(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A,
                                       int64_t lda, const Bf16Operand& B, bool acc, float* C, int64_t ldc,
                                       VectorFiller*) {
  self.gemm_packed_bf16(M, N, Kd, A, lda, B, acc, C, ldc);
}

}  // namespace hanpu
