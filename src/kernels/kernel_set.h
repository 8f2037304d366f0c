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

#include "core/aligned.h"

namespace hanpu {

// A bf16 GEMM's right operand B [Kd, N], rounded to bf16 and laid out once by a kernel set's pack_bf16 for
// that set's gemm_packed_bf16, so that an operand several products read is converted once: the chunk's
// state S (read by K S and Q S), K^T (every row block of the score products), the right factor of a
// lower-triangular product (every row block). The layout is the set's own: fp32 values of the rounded
// operand, row-major with row stride ld (the portable sets), or pairs of bf16 along Kd in 32-bit words,
// ceil(Kd / 2) rows of ld >= N words (AVX512-BF16). Only the set that packed it may read it.
struct Bf16Operand {
  int64_t Kd = 0, N = 0, ld = 0;
  AlignedVector<float> data;  // the set's words (bf16 pairs are stored in the bytes of floats)
  // Sets the shape and sizes the storage to `words` elements, for a packing to fill; returns the storage.
  float* reshape(int64_t kd, int64_t n, int64_t row_stride, int64_t words) {
    Kd = kd;
    N = n;
    ld = row_stride;
    data.resize(static_cast<std::size_t>(words));
    return data.data();
  }
};

// One term of a lower-triangular bf16 product (KernelSet::lower_times_bf16): bf16(A) [L, L], row stride lda,
// lower triangular (A[i, j] = 0 for j > i: a chunk's P or T, or its low term), times a packed B [L, N].
struct Bf16LowerTerm {
  const float* A;
  int64_t lda;
  const Bf16Operand* B;
};

// The most terms one lower_times_bf16 call chains (a product with both operands split has three).
inline constexpr int kMaxLowerTerms = 3;

// Per-row factors a bf16 rows product (KernelSet::gemm_bf16_rows, gemm_bf16_rows_tn) applies in its
// registers, so that GDN's decays and l2norm factors, which the bf16 mode applies to products rather than to
// rounded operands, cost no pass over C of their own: s_r = s[r * stride] for row r of C (stride 0: one
// factor for every row). Accumulating, they scale C's prior rows, C = diag(s) C + A B (the update's decayed
// old state, e^{G_last} S + K^T V''); otherwise the products, C = diag(s) (A B) (K S and Q S). Either way the
// bits of one fp32 multiply per element (a scale_rows pass) before, or after, the product without them.
struct RowScale {
  const float* s = nullptr;  // null: no factors
  int64_t stride = 1;
};

struct KernelSet;

// Vector work a matrix-engine kernel carries between its tile steps (KernelSet::gemm_packed_bf16_carrying):
// horizontal fusion at instruction level (issue 17), where a few registers' worth of vector instructions
// issue right after each step's tile products and run while the tile unit works through them. step(ctx)
// does one such piece and returns false once no work is left; it must not touch tile registers. `done` is
// set by the kernel when step returns false (a kernel runs no step of a done filler).
struct VectorFiller {
  bool (*step)(void* ctx) = nullptr;
  void* ctx = nullptr;
  bool done = false;
};

// KernelSet::gemm_packed_bf16_carrying's default: self.gemm_packed_bf16, carrying nothing.
void gemm_packed_bf16_carrying_nothing(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A,
                                       int64_t lda, const Bf16Operand& B, bool acc, float* C, int64_t ldc,
                                       VectorFiller* filler);

// The default forms of KernelSet's fused bf16 entries: the set's own entries, composed (kernels/fused_bf16.cpp).
void residual_split_bf16_rows_by_parts(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const uint16_t* A,
                                       int64_t lda, const Bf16Operand& B, const float* s, const float* beta,
                                       const float* V, Bf16Operand* hi, Bf16Operand* lo);
void lower_times_split_bf16_by_parts(const KernelSet& self, int64_t L, int64_t N, int nterms,
                                     const Bf16LowerTerm* terms, Bf16Operand* hi, Bf16Operand* lo, const float* scale,
                                     const float* rowscale, Bf16Operand* scaled);
void gemm_terms_bf16_by_parts(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda,
                              bool trans_a, int nterms, const Bf16Operand* const* B, bool acc, float* C, int64_t ldc,
                              RowScale rs);
void scale_rows_bf16_by_parts(const KernelSet& self, int64_t rows, int64_t cols, const float* src, int64_t lds,
                              const float* scale, int64_t sw, uint16_t* dst, int64_t ldd);
// KernelSet::gemm_scaled_acc's default (kernels/kernel_set.cpp): scale_rows over C, then gemm_nn / gemm_tn.
void gemm_scaled_acc_by_parts(const KernelSet& self, bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A,
                              int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, RowScale rs);
// KernelSet::kda_gate_factors' default (kernels/decay.cpp).
void kda_gate_factors_by_parts(const KernelSet& self, int64_t L, int64_t w, const float* g, float* ga, float* eg,
                               float* eg_last, float* g_last);

struct KernelSet {
  std::string name;            // e.g. "AVX3", "AVX2", "reference"
  int64_t gemm_column_block;   // column splits of a GEMM at multiples of this give identical columns
  // C[M, N] = (acc ? C : 0) + A[M, Kd] B[Kd, N], row-major, B's rows contiguous.
  void (*gemm_nn)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
                  float* C, int64_t ldc);
  // C[M, N] = (acc ? C : 0) + A^T B with A stored [Kd, M] (lda >= M): the transposed operand read in place.
  void (*gemm_tn)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool acc,
                  float* C, int64_t ldc);
  // out[r] = sum_c x[r * ldx + c]^2 (reduced in double) for r < rows, each row's bits whether it is summed
  // alone (rows = 1, simd.h sum_squares) or beside others.
  void (*sum_squares_rows)(int64_t rows, int64_t n, const float* x, int64_t ldx, double* out);
  // sum_squares_rows of bf16 rows (bit patterns, row stride ldx), bit for bit on their widened values: the
  // l2norm factors of bf16 q and k rows the GEMMs read as stored (no fp32 copy made for the norms).
  void (*sum_squares_rows_bf16)(int64_t rows, int64_t n, const uint16_t* x, int64_t ldx, double* out);
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
  // The pairs of one row of a KDA diagonal block (simd.h decayed_dots2): the rows of X stepped by r
  // (j < rows - 1), and out_a[j] = X_j . a, out_b[j] = X_j . b.
  void (*decayed_dots2)(int64_t rows, int64_t cols, float* X, int64_t ldx, const float* r, const float* a,
                        const float* b, float* out_a, float* out_b);
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
  // B [Kd, N] (row stride ldb) packed for gemm_packed_bf16.
  void (*pack_bf16)(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out);
  // C[M, N] = (acc ? C : 0) + bf16(A)[M, Kd] B[:Kd, :N] with B packed by this set's pack_bf16: bit-identical
  // to gemm_nn_bf16 on B's source. N <= B.N, Kd <= B.Kd, and Kd even or Kd == B.Kd (rows of B beyond Kd
  // must not share a bf16 pair with row Kd - 1).
  void (*gemm_packed_bf16)(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                           bool acc, float* C, int64_t ldc);
  // Rows of bf16 bit patterns to fp32 (exact) and back (nearest, ties to even; NaN stays a quiet NaN).
  void (*bf16_to_f32)(int64_t n, const uint16_t* src, float* dst);
  void (*f32_to_bf16)(int64_t n, const float* src, uint16_t* dst);
  // A GDN chunk's decay-masked scores (simd.h decay_mask), exp as exp_f32 computes it.
  void (*decay_mask)(int64_t L, const double* G, const float* cf, const float* ra, const float* rp, float* a, float* p,
                     int64_t ld);
  // Decay factors from gate cumsums (simd.h exp_diff), exp as exp_f32 computes it.
  void (*exp_diff)(int64_t rows, int64_t cols, const double* Ga, int64_t sa, const double* Gb, int64_t sb, float* out);
  // The packed product's forms for operands already in bf16 (rows of bf16 bit patterns, e.g. bf16 q and k
  // as loaded): pack_bf16_rows_t packs B = X^T for X [N, Kd] (row stride ldx), as pack_bf16 would pack the
  // widened transpose; gemm_bf16_rows is gemm_packed_bf16 with A [M, Kd] given as bf16 rows, bit for bit,
  // with C's row factors `rs` (RowScale) applied on the way.
  void (*pack_bf16_rows_t)(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out);
  void (*gemm_bf16_rows)(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                         bool acc, float* C, int64_t ldc, RowScale rs);
  // C[M, N] = (acc ? C : 0) + sum_t X^T B_t with X [Kd, M] given as bf16 rows (row stride ldx) and nterms (1 to
  // 3) B_t packed by this set's pack_bf16 [Kd, N]: gemm_tn_bf16 on the widened X and each B_t's source, term
  // after term accumulating from the first, bit for bit (the state updates K^T V' read the keys as bf16 rows:
  // GDN's as loaded, KDA's decayed ones from scale_rows_bf16, with no fp32 transpose on the way; KDA's V'
  // split is two terms), with C's row factors `rs` on the prior C (acc) or on the sum (kernel_set.h RowScale).
  void (*gemm_bf16_rows_tn)(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                            const Bf16Operand* const* B, bool acc, float* C, int64_t ldc, RowScale rs);
  // dst[c, r] = src[r, c] * (scale ? scale[r * sw + (sw == 1 ? 0 : c)] : 1): a transposed, optionally row- or
  // element-scaled copy (kernels/pack.h pack_transposed: the [K, L] panel of a K^T operand).
  void (*pack_transposed)(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                          float* dst, int64_t ldd);
  // lo[r, c] = x[r, c] - bf16(x[r, c]): the low term of x's two-term bf16 split (simd.h bf16_residual).
  void (*bf16_residual)(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl);
  // hi = pack_bf16(X) and lo = pack_bf16(X - bf16(X)) for X [Kd, N] (row stride ldx): both packings of a
  // two-term split right operand (plan/packing.h), bit for bit pack_bf16 on X and on bf16_residual's low
  // term; a set may make both in one pass over X.
  void (*pack_bf16_split)(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo);
  // dst[r, c] = bf16(src[r, c]) as an fp32 (nearest, ties to even; NaN stays a quiet NaN): the operand
  // rounding of the portable bf16 GEMMs (kernels/bf16_round.h), run on every operand of every call.
  void (*round_bf16_rows)(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
  // C[L, N] = (acc ? C : 0) + sum_t bf16(A_t) B_t for lower-triangular A_t (the bf16 mode's V' = T R and
  // P V', a two-term split being two or three terms): the value of gemm_packed_bf16 called on row blocks of
  // kTrilBlock, block [r0, r1) reading A's columns [0, r1), term after term into C (bf16_round.h
  // lower_times_bf16_by_blocks). A set may chain the terms in registers and skip the zero products above
  // the diagonal, so only the sign of a zero result may differ from that form.
  void (*lower_times_bf16)(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool acc, float* C,
                           int64_t ldc);
  // The kTrilBlock diagonal blocks of an n x n unit lower-triangular inverse by forward substitution, each
  // bit for bit as kernels/tril_inverse.h tril_block_inverse computes it (simd.h tril_diagonal_blocks).
  void (*tril_diagonal_blocks)(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt);
  // A chunk's gate cumsums in double, bit for bit as kernels/decay.h gate_cumsum sums them (simd.h).
  void (*gate_cumsum)(int64_t L, int64_t w, const float* g, double* G);
  // Running products of rows (simd.h chain_products): row r of out = row r - 1 of out o row r of f, r = 1..n-1,
  // one fp32 multiply per element in row order (strides may be negative: a chain running up the rows).
  void (*chain_products)(int64_t n, int64_t cols, float* out, int64_t ldo, const float* f, int64_t ldf);
  // bf16 rows widened and scaled (simd.h bf16_rows_scaled): dst[r, c] = (widened src[r, c] * f[r]) * s.
  void (*bf16_rows_scaled)(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, const float* f, float s,
                           float* dst, int64_t ldd);
  // bf16_to_f32 / f32_to_bf16 on each of `rows` rows (row strides lds, ldd) in one call (simd.h).
  void (*bf16_to_f32_rows)(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, float* dst, int64_t ldd);
  void (*f32_to_bf16_rows)(int64_t rows, int64_t cols, const float* src, int64_t lds, uint16_t* dst, int64_t ldd);
  std::string bf16_unit;  // what runs them: "AVX512-BF16 dot products" or "fp32 FMA on rounded operands"
  // Rounds of bf16 dot-product chains (flops executed), or null: the bf16 GEMM's peak probe.
  double (*bf16_peak)(int64_t iters);
  // Whether that unit is a matrix engine beside the vector unit (AMX tiles), which one core can keep busy
  // while it issues vector work (hanpu fuse --cores 1); false: the bf16 GEMMs run on the vector unit.
  bool bf16_matrix_engine = false;
  // An upper bound of the bf16 unit's MAC rate over the fp32 FMA's, from its instructions (not measured, so
  // the engine's numerics do not move with a machine's phases): 2 for VDPBF16PS (two products a lane per
  // instruction where an FMA does one: the AMD EPYC's 229 vs 115 GFLOP/s a core; Intel's cores issue it at
  // half the FMA's rate, see append_avx512bf16_kernel_sets), 1 for the portable sets (the fp32 GEMM on rounded
  // copies). The engine runs a bf16 plan's two-term split products in fp32 where this is no more than their
  // products (plan/packing.h bf16_terms).
  double bf16_rate_over_fp32 = 1;
  // Whether the bf16 GEMMs have a unit faster than the fp32 FMA (AMX tiles, VDPBF16PS): the precision `auto`
  // picks the bf16 mode for bf16 inputs only then (ops.h resolve_precision). The portable sets' bf16 GEMMs
  // are their fp32 GEMM on rounded copies: the bf16 mode there measured 0.89-0.97x exact mode's speed
  // (GDN and KDA, T = 4096, AVX3 and AVX2 sets, Intel Xeon without AVX512-BF16), with larger errors.
  bool bf16_gemms_beat_fp32() const { return bf16_rate_over_fp32 > 1; }
  // The bf16 unit's operand tile: a product executes whole tiles, its M padded to tile_rows, N to tile_cols
  // and the reduction to tile_k (AMX: 16 x 32 A tiles times 32 x 16 B tiles into 16 x 16 fp32 C tiles;
  // VDPBF16PS: one 16-column register of C a row, the reduction in pairs; the portable sets, the fp32 GEMM
  // on rounded copies, the same). hanpu calibrate writes it into the host description's bf16_matrix, whose
  // cost model pads each product to it.
  int64_t bf16_tile_rows = 1, bf16_tile_cols = 16, bf16_tile_k = 2;
  // The bf16 GDN step's fused products (exec/chunk_kernels.h): each is, bit for bit, its default, the set's
  // own entries composed (self is the set), which writes the product's fp32 value and passes over it; a set
  // may instead finish each block of the product on its way out of the registers or tiles, so that the fp32
  // value is never stored (the AMX set). Both write packed operands, as pack_bf16 / pack_bf16_split lay
  // them out.
  // residual_split_bf16_rows: R = diag(beta) (V - diag(s) (A B)) for A [M, Kd] as bf16 rows (row stride
  //   lda), B packed [Kd, N], V [M, N] contiguous: the residual from K S (GDN's with its rows' factors s, KDA's
  //   with s null: its decayed keys carry them); R's two-term split into hi, lo (gemm_bf16_rows with
  //   RowScale{s, 1}, beta_residual, pack_bf16_split).
  // gemm_packed_bf16 carrying `filler`'s steps (may be null): C bit for bit as gemm_packed_bf16 computes it,
  // with some of the filler's steps (any number, none at all on a set without a matrix engine) run between
  // its tile steps; the caller runs whatever steps are left.
  void (*gemm_packed_bf16_carrying)(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A,
                                    int64_t lda, const Bf16Operand& B, bool acc, float* C, int64_t ldc,
                                    VectorFiller* filler) = &gemm_packed_bf16_carrying_nothing;
  void (*residual_split_bf16_rows)(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const uint16_t* A,
                                   int64_t lda, const Bf16Operand& B, const float* s, const float* beta,
                                   const float* V, Bf16Operand* hi, Bf16Operand* lo) = &residual_split_bf16_rows_by_parts;
  // lower_times_split_bf16: X = sum_t bf16(A_t) B_t [L, N] (lower_times_bf16, not accumulating): V' = T R; X's
  //   two-term split into hi, lo (pack_bf16_split), and diag(f) X into scaled with f_r = scale[r] rowscale[r]
  //   (scale_rows' factor, sw = 1; rowscale may be null), pack_bf16: GDN's decayed V' for the update (scaled
  //   null: not formed, KDA's update reads V''s split).
  void (*lower_times_split_bf16)(const KernelSet& self, int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms,
                                 Bf16Operand* hi, Bf16Operand* lo, const float* scale, const float* rowscale,
                                 Bf16Operand* scaled) = &lower_times_split_bf16_by_parts;
  // gemm_terms_bf16: C = diag(s) C (accumulating; else 0) + sum_t bf16(op(A)) B_t [M, N] for nterms (1 to 3)
  //   packed right operands read by one left operand, A [M, Kd] (row stride lda) or, with trans_a, stored [Kd,
  //   M] and read transposed: the state update's K^T V' with V' split (KDA's) and its decay e^{G_last} S as
  //   the row factors rs. Its default: C's rows scaled (before an accumulating product, after a plain one:
  //   one multiply each, as RowScale defines), op(A) copied row-major
  //   (pack_transposed), and gemm_packed_bf16 term after term, accumulating from the first (a set's
  //   gemm_tn_bf16 runs the chains of gemm_nn_bf16 on the transposed copy).
  void (*gemm_terms_bf16)(const KernelSet& self, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda,
                          bool trans_a, int nterms, const Bf16Operand* const* B, bool acc, float* C, int64_t ldc,
                          RowScale rs) = &gemm_terms_bf16_by_parts;
  // scale_rows_bf16: dst = bf16(scale_rows(src, scale, sw)) as bf16 bit patterns (row stride ldd): scale_rows'
  //   products (one multiply per element, no rowscale) rounded as this set's bf16 products round an fp32
  //   operand, so gemm_bf16_rows on dst gives the bits of gemm_packed_bf16 on scale_rows' output (KDA's
  //   decayed keys and queries, K o e^G and Q o e^G, enter K S and Q S this way: one pass, no fp32 copy). Its
  //   default: scale_rows into a per-thread copy, then f32_to_bf16 (the portable sets round their operands as
  //   it does); the AVX512-BF16 sets round with the instruction their packings use.
  void (*scale_rows_bf16)(const KernelSet& self, int64_t rows, int64_t cols, const float* src, int64_t lds,
                          const float* scale, int64_t sw, uint16_t* dst, int64_t ldd) = &scale_rows_bf16_by_parts;
  // KDA's decay factors of a chunk (simd.h kda_gate_factors) from its gates g [L, w]: ga = exp_f32(g); G =
  // gate_cumsum(g); eg: an exp_diff of G at rows 0, kDecayAnchorRows, ..., chain_products of ga below each;
  // eg_last: exp_diff(G_last - G) at rows L - 1, L - 1 - kDecayAnchorRows, ..., chain_products of ga up from
  // each (eg_last_i = eg_last_{i+1} ga_{i+1}); g_last = exp_diff(G_last). The default composes those entries
  // (G stored [L, w] in double); a set may run the cumsum in registers, bit for bit the same.
  void (*kda_gate_factors)(const KernelSet& self, int64_t L, int64_t w, const float* g, float* ga, float* eg,
                           float* eg_last, float* g_last) = &kda_gate_factors_by_parts;
  // C = diag(s) C + op(A) B, op(A) = A [M, Kd] or, with trans_a, A^T for A stored [Kd, M]: the prior C's rows
  // scaled by their factors (RowScale; none with a null s) and the fp32 product accumulated onto them, the bits
  // of scale_rows over C (one multiply an element, sw = the stride) and then gemm_nn / gemm_tn accumulating.
  // The state update's decayed state plus its product, diag(e^{G_last}) S + K^T V', in one pass of S where the
  // two made two. The default composes those entries; a set may scale C on its way into the accumulators.
  void (*gemm_scaled_acc)(const KernelSet& self, bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A,
                          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                          RowScale rs) = &gemm_scaled_acc_by_parts;
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
// With AVX512-BF16 on this CPU: the AVX3 set with its bf16 GEMMs on VDPBF16PS, ahead of the others on AMD's CPUs,
// else right behind AVX3. AMD's cores run VDPBF16PS at twice the FMA's MAC rate (the AMD EPYC, Zen 4 class, of
// docs/PERFORMANCE.md: in-run probes 408-465 against 232-234 GFLOP/s on 2 threads), so the bf16 mode beats exact
// there. Intel's cores without usable AMX tiles (Cooper Lake; Sapphire Rapids and later where the OS or hypervisor
// refuses the tile state) issue it at half the FMA's rate (the Intel Xeon with AMX, its tiles put aside with
// HANPU_KERNELS=AVX3+BF16: 122.9 against 246.3 GFLOP/s a core), where AVX3's bf16 mode, fp32 FMA on rounded
// operands with the same errors, runs a GDN T = 4096 prefill (2 threads, medians) in 34.8-35.6 ms against
// 46.4-46.9 ms: there the bf16 mode must not get the slower unit (and `auto` runs bf16 inputs in exact mode: AVX3
// is active).
void append_avx512bf16_kernel_sets(std::vector<KernelSet>* out);  // kernels/gemm_avx512bf16.cpp
// With AMX tiles usable by this process (kernels/amx_support.h): the AVX512-BF16 set with its bf16 GEMMs on
// TDPBF16PS, ahead of all.
void append_amx_kernel_sets(std::vector<KernelSet>* out);  // kernels/gemm_amx.cpp
KernelSet make_reference_kernel_set();                          // kernels/reference_kernels.cpp

}  // namespace hanpu
