// The kernel registry: a kernel set is one instruction set's implementation of every CPU building block,
// as a table of functions. The registry holds every set this build compiled and this CPU can run (the
// Highway targets, best first) and the scalar reference set, which every other set is tested against
// entry by entry (tests/test_kernel_sets.cpp). The engine uses one set, chosen once per process (the best,
// or HANPU_KERNELS=name), through the free functions of kernels/simd.h — no per-call dispatch.
//
// Adding an instruction set (AMX, say): one file that defines a provider appending its KernelSet when the
// CPU supports it, and one line in kernel_set.cpp's provider list. Its tests come for free: every test
// iterates kernel_sets().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hanpu {

struct KernelSet {
  std::string name;            // e.g. "AVX3", "AVX2", "reference"
  int64_t gemm_column_block;   // column splits of a GEMM at multiples of this give identical columns
  // C[M, N] = (acc ? C : 0) + A[M, Kd] B[Kd, N], row-major, B's rows contiguous.
  void (*gemm_nn)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
                  float* C, int64_t ldc);
  // C[M, N] = (acc ? C : 0) + A^T B with A stored [Kd, M] (lda >= M): the transposed operand read in place.
  void (*gemm_tn)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
                  float* C, int64_t ldc);
  double (*sum_squares)(int64_t n, const float* x);          // sum x[i]^2 (reduced in double)
  void (*exp_f32)(int64_t n, const float* x, float* y);      // y = exp(x)
  // dst[r, c] = src[r, c] * scale[r * sw + (sw > 1 ? c : 0)] * (rowscale ? rowscale[r] : 1); dst may be src.
  void (*scale_rows)(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     const float* rowscale, float* dst, int64_t ldd);
  // out[i, j] = beta[i] (v[i, j] - ks[i, j]) over contiguous [rows, cols].
  void (*beta_residual)(int64_t rows, int64_t cols, const float* beta, const float* v, const float* ks, float* out);
  // One decode token in place (DESIGN.md §1) on a k-first S [K, V] / v-first S [V, K] (row stride lds).
  void (*decode_k_first)(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q,
                         const float* k, const float* v, float beta, float* o);
  void (*decode_v_first)(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q,
                         const float* k, const float* v, float beta, float* o);
  // out_a[r] = M[r, :] . a, out_b[r] = M[r, :] . b.
  void (*row_dots2)(int64_t rows, int64_t cols, const float* M, int64_t ldm, const float* a, const float* b,
                    float* out_a, float* out_b);
  // Rounds of twelve independent register FMA chains; returns the flops executed (the fp32 peak probe).
  double (*fma_peak)(int64_t iters);
  // The bf16 precision mode's GEMMs: the gemm_nn / gemm_tn products with both operands rounded to bf16
  // (nearest, ties to even) on the way in, exact products, fp32 accumulation. Sets with a bf16 dot-product
  // instruction accumulate pairs of products per step (their sums may differ from the reference set's
  // in the last bits); the others round into copies and run their fp32 GEMM.
  void (*gemm_nn_bf16)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                       bool acc, float* C, int64_t ldc);
  void (*gemm_tn_bf16)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                       bool acc, float* C, int64_t ldc);
  std::string bf16_unit;  // what runs them: "AVX512-BF16 dot products" or "fp32 FMA on rounded operands"
  // Rounds of bf16 dot-product chains (flops executed), or null: the bf16 GEMM's peak probe.
  double (*bf16_peak)(int64_t iters);
};

// Every set this build compiled that this CPU runs, best first; the reference set last.
const std::vector<KernelSet>& kernel_sets();
// The plain C++ loops every set is tested against.
const KernelSet& reference_kernel_set();
// The set the engine uses: the best, or the one named by $HANPU_KERNELS (an unknown name is an error
// printed once, and the best is used).
const KernelSet& active_kernels();

// Providers (one per instruction-set family) append the sets they compiled and the CPU supports.
void append_highway_kernel_sets(std::vector<KernelSet>* out);  // kernels/simd.cc
// With AVX512-BF16 on this CPU: the AVX3 set with its bf16 GEMMs on VDPBF16PS, ahead of the others.
void append_avx512bf16_kernel_sets(std::vector<KernelSet>* out);  // kernels/gemm_avx512bf16.cpp
KernelSet make_reference_kernel_set();                          // kernels/reference_kernels.cpp

}  // namespace hanpu
