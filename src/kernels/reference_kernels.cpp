// The reference kernel set: every entry of KernelSet as the plain loop of its definition, in fp32, sums in
// the natural order; the GEMM is the scalar tile of kernels/gemm.h (one scalar GEMM in the project). Slow
// and obviously right; the other sets are tested against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/bf16_round.h"
#include "kernels/decay.h"
#include "kernels/gemm.h"
#include "kernels/kernel_set.h"
#include "kernels/tril_inverse.h"

namespace hanpu {

namespace {

// The scalar GEMM of kernels/gemm.h (the chunk path's), as the set's two forms.
template <bool TransA>
void gemm(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
          float* C, int64_t ldc) {
  gemm_f32(TransA ? Trans::kT : Trans::kN, Trans::kN, M, N, Kd, 1.0f, A, lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
}

double sum_squares(int64_t n, const float* x) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void sum_squares_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, double* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = sum_squares(n, x + r * ldx);
}

void sum_squares_rows_bf16(int64_t rows, int64_t n, const uint16_t* x, int64_t ldx, double* out) {
  std::vector<float> row(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) row[c] = bf16_bits_to_f32(x[r * ldx + c]);
    out[r] = sum_squares(n, row.data());
  }
}

void exp_f32(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void scale_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                const float* rowscale, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float rs = rowscale ? rowscale[r] : 1.0f;
    for (int64_t c = 0; c < cols; ++c) {
      dst[r * ldd + c] = sw > 1 ? src[r * lds + c] * scale[r * sw + c] * rs : src[r * lds + c] * (scale[r * sw] * rs);
    }
  }
}

void beta_residual(int64_t rows, int64_t cols, const float* beta, const float* v, const float* ks, float* out) {
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = beta[i / cols] * (v[i] - ks[i]);
}

// S <- diag(decay) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q, read as (D S)^T q + (k . q) u from
// the state before the write with k . q summed in double, as the SIMD kernels do (ops/recurrence.h says why).
// S(r, c) addresses the k-first element (row r of K, column c of V).
template <bool VFirst>
void decode(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
            const float* v, float beta, float* o) {
  auto at = [&](int64_t r, int64_t c) -> float& { return VFirst ? S[c * lds + r] : S[r * lds + c]; };
  double kq = 0;
  for (int64_t r = 0; r < K; ++r) kq += static_cast<double>(k[r]) * q[r];
  for (int64_t r = 0; r < K; ++r) {
    for (int64_t c = 0; c < V; ++c) at(r, c) *= decay[r];
  }
  for (int64_t c = 0; c < V; ++c) {
    float sk = 0, sq = 0;
    for (int64_t r = 0; r < K; ++r) {
      sk += at(r, c) * k[r];
      sq += at(r, c) * q[r];
    }
    const float u = beta * (v[c] - sk);
    for (int64_t r = 0; r < K; ++r) at(r, c) += k[r] * u;
    o[c] = sq + static_cast<float>(kq) * u;
  }
}

void decayed_dots2(int64_t rows, int64_t cols, float* X, int64_t ldx, const float* r, const float* a, const float* b,
                   float* out_a, float* out_b) {
  for (int64_t j = 0; j < rows; ++j) {
    float sa = 0, sb = 0;
    for (int64_t c = 0; c < cols; ++c) {
      float& x = X[j * ldx + c];
      if (r && j < rows - 1) x *= r[c];
      sa += x * a[c];
      sb += x * b[c];
    }
    out_a[j] = sa;
    out_b[j] = sb;
  }
}

double fma_peak(int64_t iters) {
  float acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = static_cast<float>(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (float& a : acc) a = std::fma(a, 0.999999f, 1e-7f);
  }
  volatile float sink = acc[0] + acc[11];
  (void)sink;
  return 2.0 * 12.0 * static_cast<double>(iters);
}

template <bool TransA>
void gemm_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
               float* C, int64_t ldc) {
  gemm_bf16_by_rounding(&gemm<TransA>, &round_block_bf16, TransA, M, N, Kd, A, lda, B, ldb, acc, C, ldc);
}

void gemm_packed_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool acc,
                      float* C, int64_t ldc) {
  gemm_packed_bf16_by_rounding(&gemm<false>, &round_block_bf16, M, N, Kd, A, lda, B, acc, C, ldc);
}

void pack_bf16(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out) {
  pack_bf16_by_rounding(&round_block_bf16, Kd, N, B, ldb, out);
}

void bf16_to_f32(int64_t n, const uint16_t* src, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i]);
}


void f32_to_bf16(int64_t n, const float* src, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16_bits(src[i]);
}

void decay_mask(int64_t L, const double* G, const float* cf, const float* ra, const float* rp, float* a, float* p,
                int64_t ld) {
  decay_mask_by_entries(&exp_f32, L, G, cf, ra, rp, a, p, ld);
}

void gemm_bf16_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B, bool acc,
                    float* C, int64_t ldc, RowScale rs) {
  gemm_bf16_rows_by_widening(&gemm<false>, &bf16_to_f32, M, N, Kd, A, lda, B, acc, C, ldc, rs);
}

void gemm_bf16_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                       const Bf16Operand* const* B, bool acc, float* C, int64_t ldc, RowScale rs) {
  gemm_bf16_rows_tn_by_widening(&gemm<true>, &bf16_to_f32, M, N, Kd, X, ldx, nterms, B, acc, C, ldc, rs);
}

void exp_diff(int64_t rows, int64_t cols, const double* Ga, int64_t sa, const double* Gb, int64_t sb, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < cols; ++d) {
      const float x = static_cast<float>(Ga[r * sa + d] - (Gb ? Gb[r * sb + d] : 0.0));
      exp_f32(1, &x, out + r * cols + d);
    }
  }
}

void pack_transposed(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float f = scale ? scale[r * sw + (sw == 1 ? 0 : c)] : 1.0f;
      dst[c * ldd + r] = src[r * lds + c] * f;
    }
  }
}
void pack_bf16_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  pack_bf16_rows_t_by_widening(&bf16_to_f32, &pack_transposed, N, Kd, X, ldx, out);
}

void bf16_residual(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) lo[r * ldl + c] = x[r * ldx + c] - round_bf16(x[r * ldx + c]);
  }
}

void tril_diagonal_blocks(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt) {
  for (int64_t i0 = 0; i0 < n; i0 += kTrilBlock) {
    tril_block_inverse(std::min(kTrilBlock, n - i0), A + i0 * lda + i0, lda, T + i0 * ldt + i0, ldt);
  }
}

void bf16_rows_scaled(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, const float* f, float s, float* dst,
                      int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[r * ldd + c] = (bf16_bits_to_f32(src[r * lds + c]) * f[r]) * s;
  }
}

// A row conversion applied to each of `rows` rows.
template <class S, class D, void (*Convert)(int64_t, const S*, D*)>
void rows_of(int64_t rows, int64_t cols, const S* src, int64_t lds, D* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) Convert(cols, src + r * lds, dst + r * ldd);
}

void chain_products(int64_t n, int64_t cols, float* out, int64_t ldo, const float* f, int64_t ldf) {
  for (int64_t r = 1; r < n; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * ldo + c] = out[(r - 1) * ldo + c] * f[r * ldf + c];
  }
}

}  // namespace

KernelSet make_reference_kernel_set() {
  return {"reference",      1,          &gemm<false>,  &gemm<true>,        &sum_squares_rows, &sum_squares_rows_bf16,
          &exp_f32,  &scale_rows,
          &beta_residual, &decode<false>, &decode<true>, &decayed_dots2, &fma_peak,
          &gemm_bf16<false>, &gemm_bf16<true>, &pack_bf16, &gemm_packed_bf16, &bf16_to_f32, &f32_to_bf16,
          &decay_mask, &exp_diff, &pack_bf16_rows_t, &gemm_bf16_rows, &gemm_bf16_rows_tn, &pack_transposed,
          &bf16_residual, &pack_bf16_split_by_parts<&pack_bf16, &bf16_residual>, &round_block_bf16,
          &lower_times_bf16_by_blocks<&gemm_packed_bf16>, &tril_diagonal_blocks,
          &gate_cumsum, &chain_products, &bf16_rows_scaled, &rows_of<uint16_t, float, &bf16_to_f32>,
          &rows_of<float, uint16_t, &f32_to_bf16>, "fp32 FMA on rounded operands", nullptr};
}

}  // namespace hanpu
