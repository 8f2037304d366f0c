// Highway implementation of kernels/simd.h; this file is compiled once per target by foreach_target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/aligned.h"
#include "kernels/bf16_round.h"
#include "kernels/decay.h"
#include "kernels/kernel_set.h"
#include "kernels/pack.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"
// Per target, after foreach_target: its Highway functions join hanpu::HWY_NAMESPACE.
#include "kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hanpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using hanpu::HWY_NAMESPACE::ExpOf;
using hanpu::HWY_NAMESPACE::LoadF32;
using hanpu::HWY_NAMESPACE::RoundBf16;
using hanpu::HWY_NAMESPACE::RoundedBf16Bits;
using hanpu::HWY_NAMESPACE::StoreBf16Bits;

// Register blocks: a block holds C[MR rows, NV vectors] in MR x NV accumulators beside its NV vectors of B
// and one broadcast of A, and per step along the reduction loads NV + MR operands for MR x NV FMAs. AVX-512
// has 32 vector registers: 6 x 4 (24 accumulators, 10 loads per 24 FMAs), and where fewer than four vectors
// of columns remain 8 x 3 or 8 x 2. The 16-register targets take 6 x 2. (8 x 2 everywhere on AVX-512 measured
// a GDN chunk step's products 58.8 us in cache, 6 x 4 48.5 us: Intel Xeon, Ice Lake, no AMX; the results are
// the same bits, as every element's FMA chain is unchanged.)
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kMaxNV = 4;
constexpr int RowsFor(int nv) { return nv >= 4 ? 6 : 8; }
#else
constexpr int kMaxNV = 2;
constexpr int RowsFor(int) { return 6; }
#endif

// C[MR rows, NV vectors] (+)= op(A)[MR, Kd] B[Kd, NV vectors]. D is a full or a 1-lane tag (column tail).
// op(A)[r, p] is A[r * lda + p], or A[p * lda + r] with TransA: the broadcast source is all that changes.
// The accumulators start from zero, or from C (accumulate); with Scaled (KernelSet::gemm_scaled_acc) from C's
// rows times their factors cs.s[r * cs.stride], scale_rows' one multiply an element (a template parameter:
// the plain products' code stays as it is without factors; a run-time test there measured them 3% slower).
template <bool TransA, bool Scaled, int MR, int NV, class D>
HWY_INLINE void Block(D d, int64_t Kd, const float* HWY_RESTRICT A, int64_t lda, const float* HWY_RESTRICT B,
                      int64_t ldb, bool accumulate, RowScale cs, float* HWY_RESTRICT C, int64_t ldc) {
  using V = hn::Vec<D>;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      if (!accumulate) {
        acc[r][v] = hn::Zero(d);
      } else if constexpr (Scaled) {
        acc[r][v] = hn::Mul(hn::LoadU(d, C + r * ldc + v * nl), hn::Set(d, cs.s[r * cs.stride]));
      } else {
        acc[r][v] = hn::LoadU(d, C + r * ldc + v * nl);
      }
    }
  }
  for (int64_t p = 0; p < Kd; ++p) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, B + p * ldb + v * nl);
    for (int r = 0; r < MR; ++r) {
      const V a = hn::Set(d, TransA ? A[p * lda + r] : A[r * lda + p]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, C + r * ldc + v * nl);
  }
}

// All rows of one column block: MR-row blocks, a 4-row block, then single rows.
template <bool TransA, bool Scaled, int NV, class D>
HWY_INLINE void ColumnBlock(D d, int64_t M, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                            bool accumulate, RowScale cs, float* C, int64_t ldc) {
  const int64_t row_step = TransA ? 1 : lda;  // where row i of op(A) starts
  const auto rows_from = [cs](int64_t i) { return RowScale{Scaled ? cs.s + i * cs.stride : nullptr, cs.stride}; };
  int64_t i = 0;
  constexpr int MR = RowsFor(NV);
  for (; i + MR <= M; i += MR) {
    Block<TransA, Scaled, MR, NV>(d, Kd, A + i * row_step, lda, B, ldb, accumulate, rows_from(i), C + i * ldc, ldc);
  }
  if (MR > 4 && i + 4 <= M) {
    Block<TransA, Scaled, 4, NV>(d, Kd, A + i * row_step, lda, B, ldb, accumulate, rows_from(i), C + i * ldc, ldc);
    i += 4;
  }
  for (; i < M; ++i) {
    Block<TransA, Scaled, 1, NV>(d, Kd, A + i * row_step, lda, B, ldb, accumulate, rows_from(i), C + i * ldc, ldc);
  }
}

// The last `tail` (< one vector) columns as one full vector on zero-padded copies of B's and C's tail
// columns: every lane runs the same MulAdd chain a single-lane block would (identical results), at vector
// speed, and nothing is read or written outside the matrices.
template <bool TransA, bool Scaled>
HWY_NOINLINE void TailColumns(int64_t M, int64_t tail, int64_t Kd, const float* A, int64_t lda, const float* B,
                              int64_t ldb, bool accumulate, RowScale cs, float* C, int64_t ldc) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  thread_local std::vector<float> bp, cp;
  bp.assign(static_cast<std::size_t>(Kd * nl), 0.0f);
  cp.assign(static_cast<std::size_t>(M * nl), 0.0f);
  for (int64_t p = 0; p < Kd; ++p) std::copy(B + p * ldb, B + p * ldb + tail, bp.data() + p * nl);
  if (accumulate) {
    for (int64_t i = 0; i < M; ++i) std::copy(C + i * ldc, C + i * ldc + tail, cp.data() + i * nl);
  }
  ColumnBlock<TransA, Scaled, 1>(d, M, Kd, A, lda, bp.data(), nl, accumulate, cs, cp.data(), nl);
  for (int64_t i = 0; i < M; ++i) std::copy(cp.data() + i * nl, cp.data() + i * nl + tail, C + i * ldc);
}

template <bool TransA, bool Scaled = false>
void Gemm(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb, bool accumulate,
          float* C, int64_t ldc, RowScale cs = {}) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  if constexpr (kMaxNV == 4) {
    for (; j + 4 * nl <= N; j += 4 * nl) {
      ColumnBlock<TransA, Scaled, 4>(d, M, Kd, A, lda, B + j, ldb, accumulate, cs, C + j, ldc);
    }
    if (j + 3 * nl <= N) {
      ColumnBlock<TransA, Scaled, 3>(d, M, Kd, A, lda, B + j, ldb, accumulate, cs, C + j, ldc);
      j += 3 * nl;
    }
  }
  for (; j + 2 * nl <= N; j += 2 * nl) {
    ColumnBlock<TransA, Scaled, 2>(d, M, Kd, A, lda, B + j, ldb, accumulate, cs, C + j, ldc);
  }
  for (; j + nl <= N; j += nl) ColumnBlock<TransA, Scaled, 1>(d, M, Kd, A, lda, B + j, ldb, accumulate, cs, C + j, ldc);
  if (j < N) TailColumns<TransA, Scaled>(M, N - j, Kd, A, lda, B + j, ldb, accumulate, cs, C + j, ldc);
}

void GemmNN(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
            bool accumulate, float* C, int64_t ldc) {
  Gemm<false>(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void GemmTN(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
            bool accumulate, float* C, int64_t ldc) {
  Gemm<true>(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

// kernels/kernel_set.h gemm_scaled_acc: the factors applied as each block loads its rows of C.
void GemmScaledAcc(const KernelSet&, bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda,
                   const float* B, int64_t ldb, float* C, int64_t ldc, RowScale rs) {
  if (!rs.s) {
    (trans_a ? &GemmTN : &GemmNN)(M, N, Kd, A, lda, B, ldb, true, C, ldc);
  } else if (trans_a) {
    Gemm<true, true>(M, N, Kd, A, lda, B, ldb, true, C, ldc, rs);
  } else {
    Gemm<false, true>(M, N, Kd, A, lda, B, ldb, true, C, ldc, rs);
  }
}

// A full vector of fp32 values from x: loaded, or widened from bf16 bit patterns (exact).
inline float ScalarF32(float x) { return x; }
inline float ScalarF32(uint16_t x) { return bf16_bits_to_f32(x); }

// sum x^2 over each of R rows of n values (fp32, or bf16 widened): per row one fp32 FMA chain over its
// vectors, the lanes summed in fp32, then the tail added in double. The R rows' chains are independent, so
// they overlap. A bf16 row's sums are those of its widened fp32 row, bit for bit.
template <int R, typename T>
HWY_INLINE void SumSquaresBlock(int64_t n, const T* x, int64_t ldx, double* out) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<decltype(d)> acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  int64_t i = 0;
  for (; i + nl <= n; i += nl) {
    for (int r = 0; r < R; ++r) {
      const auto v = LoadF32(d, x + r * ldx + i);
      acc[r] = hn::MulAdd(v, v, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const T* xr = x + r * ldx;
    double s = hn::GetLane(hn::SumOfLanes(d, acc[r]));
    for (int64_t c = i; c < n; ++c) s += static_cast<double>(ScalarF32(xr[c])) * ScalarF32(xr[c]);
    out[r] = s;
  }
}

template <typename T>
void SumSquaresRowsOf(int64_t rows, int64_t n, const T* x, int64_t ldx, double* out) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) SumSquaresBlock<4>(n, x + r * ldx, ldx, out + r);
  for (; r < rows; ++r) SumSquaresBlock<1>(n, x + r * ldx, ldx, out + r);
}

void SumSquaresRows(int64_t rows, int64_t n, const float* x, int64_t ldx, double* out) {
  SumSquaresRowsOf(rows, n, x, ldx, out);
}

void SumSquaresRowsBf16(int64_t rows, int64_t n, const uint16_t* x, int64_t ldx, double* out) {
  SumSquaresRowsOf(rows, n, x, ldx, out);
}

void ExpF32(int64_t n, const float* x, float* y) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(ExpOf(d, hn::LoadU(d, x + i)), d, y + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) hn::StoreU(ExpOf(d1, hn::LoadU(d1, x + i)), d1, y + i);
}

// out[r * cols + d] = exp(float(Ga[r * sa + d] - (Gb ? Gb[r * sb + d] : 0))), the difference in double. The
// exp runs on full float vectors: two double vectors are demoted and combined first (a float vector holds
// twice the lanes of a double one), as many lanes per Exp as exp_f32 has.
template <class D64, class D32>
HWY_INLINE hn::Vec<D32> DemotedDiff(D64 d64, D32 d32, const double* a, const double* b) {
  auto x = hn::LoadU(d64, a);
  if (b) x = hn::Sub(x, hn::LoadU(d64, b));
  return hn::DemoteTo(d32, x);
}

void ExpDiff(int64_t rows, int64_t cols, const double* Ga, int64_t sa, const double* Gb, int64_t sb, float* out) {
  const hn::CappedTag<double, 1> d64_1;
  const hn::CappedTag<float, 1> d32_1;
  for (int64_t r = 0; r < rows; ++r) {
    const double* a = Ga + r * sa;
    const double* b = Gb ? Gb + r * sb : nullptr;
    float* o = out + r * cols;
    int64_t c = 0;
#if HWY_TARGET != HWY_SCALAR
    const hn::ScalableTag<float> df;
    const hn::Half<decltype(df)> dh;
    const hn::Repartition<double, decltype(df)> dd;
    const int64_t nl = static_cast<int64_t>(hn::Lanes(df)), nh = static_cast<int64_t>(hn::Lanes(dh));
    for (; c + nl <= cols; c += nl) {
      const auto lo = DemotedDiff(dd, dh, a + c, b ? b + c : nullptr);
      const auto hi = DemotedDiff(dd, dh, a + c + nh, b ? b + c + nh : nullptr);
      hn::StoreU(ExpOf(df, hn::Combine(df, hi, lo)), df, o + c);
    }
#endif
    for (; c < cols; ++c) {
      hn::StoreU(ExpOf(d32_1, DemotedDiff(d64_1, d32_1, a + c, b ? b + c : nullptr)), d32_1, o + c);
    }
  }
}

// Lanes [c0, c0 + Lanes(d)) of row k of a diagonal block (columns from the block's first): m = r cf, then
// a_c <- a_c * (sa m) for c < k and p_c <- p_c * (sp m) for c <= k, zero beyond.
template <class D>
HWY_INLINE void DecayMaskLanes(D d, int64_t k, int64_t c0, const float* r, const float* cf, float sa, float sp, float* a,
                               float* p) {
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  const auto rv = hn::LoadU(d, r + c0);
  const auto m = cf ? hn::Mul(rv, hn::LoadU(d, cf + c0)) : rv;
  if (a) {
    const auto below = hn::FirstN(d, static_cast<size_t>(std::clamp<int64_t>(k - c0, 0, nl)));
    hn::StoreU(hn::IfThenElseZero(below, hn::Mul(hn::LoadU(d, a + c0), hn::Mul(hn::Set(d, sa), m))), d, a + c0);
  }
  if (p) {
    const auto upto = hn::FirstN(d, static_cast<size_t>(std::clamp<int64_t>(k + 1 - c0, 0, nl)));
    hn::StoreU(hn::IfThenElseZero(upto, hn::Mul(hn::LoadU(d, p + c0), hn::Mul(hn::Set(d, sp), m))), d, p + c0);
  }
}

// GDN's decay-masked scores of a chunk (simd.h decay_mask). The exps (the step factors, each 16-row block's
// left factors e and d, its anchor rows) go through ExpF32 on buffers zero-padded to whole blocks, so every
// exp runs on a full vector; the left of a block is plain multiply loops over whole blocks of columns (the
// compiler vectorises them for this target); the diagonal block's running row lives in whole vectors (a
// 16-float row of a stack array that only vector loads and stores touch: writing it lane by lane and then
// reading it as a vector stalled store forwarding, which made this slower than one exp per entry). Each
// product is one fp32 multiply whatever the width, so the bits are the definition's. Per 64-row chunk about
// 30 vectors of exps instead of 160.
void DecayMask(int64_t L, const double* G, const float* cf, const float* ra, const float* rp, float* a, float* p,
               int64_t ld) {
  if (L <= 0) return;
  constexpr int64_t B = kIntraBlock, R = kDecayAnchorRows;
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));  // divides B on every target
  const int64_t Lp = (L + B - 1) / B * B, nb = Lp / B;
  // Every exponent of the chunk in x, then one ExpF32 into y (many independent vectors, so the exps overlap):
  // the step factors (Lp), per block i0 > 0 its e (B) and d (i0), then per block its anchor rows (B B / R * B).
  const int64_t left0 = Lp, anchors0 = left0 + (nb - 1) * B + Lp * (nb - 1) / 2, total = anchors0 + nb * B * B / R;
  thread_local AlignedVector<float> buf;
  buf.resize(static_cast<std::size_t>(2 * total + Lp));
  float* __restrict x = buf.data();
  float* __restrict y = x + total;
  float* __restrict dc = y + total;  // [Lp] the left factors d_j cf_j of the current block
  x[0] = 0.0f;
  for (int64_t i = 1; i < Lp; ++i) x[i] = i < L ? static_cast<float>(G[i] - G[i - 1]) : 0.0f;
  const auto left_at = [&](int64_t i0) { return left0 + (i0 / B - 1) * B + i0 * (i0 / B - 1) / 2; };
  const auto anchors_at = [&](int64_t i0) { return anchors0 + i0 / B * B * B / R; };
  for (int64_t i0 = 0; i0 < L; i0 += B) {
    const int64_t n = std::min(B, L - i0);
    if (i0 > 0) {  // e_i = exp(f(G_i - G_i0)) (B values), then d_j = exp(f(G_i0 - G_j)) (i0 values)
      float* xl = x + left_at(i0);
      for (int64_t k = 0; k < B; ++k) xl[k] = k < n ? static_cast<float>(G[i0 + k] - G[i0]) : 0.0f;
      for (int64_t j = 0; j < i0; ++j) xl[B + j] = static_cast<float>(G[i0] - G[j]);
    }
    // The anchor rows k = 0, R, 2R, ...: exp(f(G_(i0+k) - G_(i0+c))) for c <= k, exp(0) beyond (never used:
    // lane c is set to 1 at row c before a row reads it).
    for (int64_t k = 0; k < B; k += R) {
      float* xa = x + anchors_at(i0) + k / R * B;
      for (int64_t c = 0; c < B; ++c) xa[c] = c <= k && k < n && c < n ? static_cast<float>(G[i0 + k] - G[i0 + c]) : 0.0f;
    }
  }
  ExpF32(total, x, y);
  const float* ga = y;  // ga[0] unused
  for (int64_t i0 = 0; i0 < L; i0 += B) {
    const int64_t n = std::min(B, L - i0);
    if (i0 > 0) {  // left of the block
      const float* e = y + left_at(i0);
      for (int64_t j = 0; j < i0; ++j) dc[j] = cf ? e[B + j] * cf[j] : e[B + j];
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = i0 + k;
        if (a) {
          const float s = (ra ? ra[i] : 1.0f) * e[k];
          float* __restrict row = a + i * ld;
          for (int64_t j = 0; j < i0; ++j) row[j] *= s * dc[j];
        }
        if (p) {
          const float s = (rp ? rp[i] : 1.0f) * e[k];
          float* __restrict row = p + i * ld;
          for (int64_t j = 0; j < i0; ++j) row[j] *= s * dc[j];
        }
      }
    }
    const float* anchor = y + anchors_at(i0);
    HWY_ALIGN float r[B];  // the running row r_(i, i0 + c)
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = i0 + k;
      for (int64_t c0 = 0; c0 < B; c0 += N) {
        const auto rv = k % R == 0 ? hn::Load(d, anchor + k / R * B + c0)
                                   : hn::IfThenElse(hn::Eq(hn::Iota(d, static_cast<float>(c0)), hn::Set(d, static_cast<float>(k))),
                                                    hn::Set(d, 1.0f), hn::Mul(hn::Load(d, r + c0), hn::Set(d, ga[i])));
        hn::Store(rv, d, r + c0);
      }
      const float sa = ra ? ra[i] : 1.0f, sp = rp ? rp[i] : 1.0f;
      float* ar = a ? a + i * ld + i0 : nullptr;
      float* pr = p ? p + i * ld + i0 : nullptr;
      const float* cr = cf ? cf + i0 : nullptr;
      int64_t c0 = 0;
      for (; c0 + N <= n; c0 += N) DecayMaskLanes(d, k, c0, r, cr, sa, sp, ar, pr);
      const hn::CappedTag<float, 1> d1;
      for (; c0 < n; ++c0) DecayMaskLanes(d1, k, c0, r, cr, sa, sp, ar, pr);
      // Above the diagonal block: zero.
      if (a) std::fill(a + i * ld + i0 + n, a + i * ld + L, 0.0f);
      if (p) std::fill(p + i * ld + i0 + n, p + i * ld + L, 0.0f);
    }
  }
}

// Twelve independent FMA chains held in registers: the core's fp32 multiply-add throughput with no memory
// traffic. Returns the flops executed (2 per lane per FMA).
double FmaPeak(int64_t iters) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const V m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  V acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = hn::Set(d, static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) acc[k] = hn::MulAdd(acc[k], m, c);
  }
  V sum = acc[0];
  for (int k = 1; k < 12; ++k) sum = hn::Add(sum, acc[k]);
  volatile float sink = hn::GetLane(sum);  // keeps the chains alive
  (void)sink;
  return 2.0 * 12.0 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
}

// dst[r, c] = src[r, c] * scale[r * sw + (sw == 1 ? 0 : c)] * (rowscale ? rowscale[r] : 1).
void ScaleRows(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
               const float* rowscale, float* dst, int64_t ldd) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float rs = rowscale ? rowscale[r] : 1.0f;
    const float* x = src + r * lds;
    float* y = dst + r * ldd;
    if (sw <= 1) {
      const float f = scale[r * sw] * rs;
      int64_t c = 0;
      for (; c + nl <= cols; c += nl) hn::StoreU(hn::Mul(hn::LoadU(d, x + c), hn::Set(d, f)), d, y + c);
      for (; c < cols; ++c) y[c] = x[c] * f;
    } else {
      const float* f = scale + r * sw;
      int64_t c = 0;
      for (; c + nl <= cols; c += nl) {
        hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + c), hn::LoadU(d, f + c)), hn::Set(d, rs)), d, y + c);
      }
      for (; c < cols; ++c) {
        hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d1, x + c), hn::LoadU(d1, f + c)), hn::Set(d1, rs)), d1, y + c);
      }
    }
  }
}

// out[i, j] = beta[i] * (v[i, j] - ks[i, j]).
void BetaResidual(int64_t rows, int64_t cols, const float* beta, const float* v, const float* ks, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < rows; ++i) {
    const auto b = hn::Set(d, beta[i]);
    const int64_t o = i * cols;
    int64_t j = 0;
    for (; j + nl <= cols; j += nl) {
      hn::StoreU(hn::Mul(b, hn::Sub(hn::LoadU(d, v + o + j), hn::LoadU(d, ks + o + j))), d, out + o + j);
    }
    for (; j < cols; ++j) out[o + j] = beta[i] * (v[o + j] - ks[o + j]);
  }
}

// k . q of a decode token, summed in double and rounded once: from a zero state o = u (k . q), which cancels for
// q nearly orthogonal to k (ops/recurrence.h). Once a token, for every column, in double lanes (a product of two
// floats is exact in double).
float KDotQ(int64_t K, const float* k, const float* q) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(dd));
  auto acc = hn::Zero(dd);
  int64_t r = 0;
  for (; r + nl <= K; r += nl) {
    acc = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, k + r)), hn::PromoteTo(dd, hn::LoadU(df, q + r)), acc);
  }
  double kq = hn::GetLane(hn::SumOfLanes(dd, acc));
  for (; r < K; ++r) kq += static_cast<double>(k[r]) * q[r];
  return static_cast<float>(kq);
}

// Columns [j, j + NV lanes) of one decode token on a k-first state. One read pass accumulates, in
// registers, a = (D S)^T k and b = (D S)^T q (D = diag(decay)); then u = beta (v - a) and, since
// S' = D S + k u^T, o = S'^T q = b + u kq (kq = k . q) without reading S' back; a second pass writes S'. That is
// two reads and one write of the tile. The write pass walks the rows backwards: with a power-of-two row
// stride the tile's rows crowd a few L1 sets (512 B rows: 16 rows per set for K = 128, more than the 12
// ways), so LRU keeps the rows read last, and walking back from them hits those first.
template <int NV, class D>
HWY_INLINE void DecodeTile(D d, int64_t K, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                           const float* v, float beta, float kq, float* o) {
  using Vec = hn::Vec<D>;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  Vec ak[NV], aq[NV];
  for (int i = 0; i < NV; ++i) ak[i] = aq[i] = hn::Zero(d);
  for (int64_t r = 0; r < K; ++r) {
    const float* s = S + r * lds;
    const Vec dr = hn::Set(d, decay[r]), kr = hn::Set(d, k[r]), qr = hn::Set(d, q[r]);
    for (int i = 0; i < NV; ++i) {
      const Vec x = hn::Mul(hn::LoadU(d, s + i * nl), dr);
      ak[i] = hn::MulAdd(x, kr, ak[i]);
      aq[i] = hn::MulAdd(x, qr, aq[i]);
    }
  }
  Vec u[NV];
  for (int i = 0; i < NV; ++i) {
    u[i] = hn::Mul(hn::Set(d, beta), hn::Sub(hn::LoadU(d, v + i * nl), ak[i]));
    hn::StoreU(hn::MulAdd(u[i], hn::Set(d, kq), aq[i]), d, o + i * nl);
  }
  for (int64_t r = K - 1; r >= 0; --r) {  // S <- D S + k u^T
    float* s = S + r * lds;
    const Vec dr = hn::Set(d, decay[r]), kr = hn::Set(d, k[r]);
    for (int i = 0; i < NV; ++i) hn::StoreU(hn::MulAdd(kr, u[i], hn::Mul(hn::LoadU(d, s + i * nl), dr)), d, s + i * nl);
  }
}

// One decode token on a k-first state S [K, V] (row stride lds), in place (DESIGN.md §1):
//   S <- diag(decay) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q
// Column tiles of four vectors, then one vector, then single lanes. decay has K entries.
void DecodeKFirst(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                  const float* v, float beta, float* o) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  const float kqf = KDotQ(K, k, q);
  int64_t j = 0;
  for (; j + 4 * nl <= V; j += 4 * nl) DecodeTile<4>(d, K, S + j, lds, decay, q, k, v + j, beta, kqf, o + j);
  for (; j + nl <= V; j += nl) DecodeTile<1>(d, K, S + j, lds, decay, q, k, v + j, beta, kqf, o + j);
  for (; j < V; ++j) DecodeTile<1>(d1, K, S + j, lds, decay, q, k, v + j, beta, kqf, o + j);
}

// The same token on a v-first state S [V, K]: row j of S is column j of the k-first state. Per row, as in
// DecodeTile, one read pass for a = (D s) . k and b = (D s) . q, then the write pass s <- D s + u_j k, and
// o_j = b + u_j (k . q) from the state before the write.
void DecodeVFirst(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                  const float* v, float beta, float* o) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  const float kq = KDotQ(K, k, q);
  for (int64_t j = 0; j < V; ++j) {
    float* s = S + j * lds;
    auto ak = hn::Zero(d), aq = hn::Zero(d);
    int64_t r = 0;
    for (; r + nl <= K; r += nl) {
      const auto x = hn::Mul(hn::LoadU(d, s + r), hn::LoadU(d, decay + r));
      ak = hn::MulAdd(x, hn::LoadU(d, k + r), ak);
      aq = hn::MulAdd(x, hn::LoadU(d, q + r), aq);
    }
    float kv = hn::GetLane(hn::SumOfLanes(d, ak)), qv = hn::GetLane(hn::SumOfLanes(d, aq));
    for (; r < K; ++r) {
      const float x = s[r] * decay[r];
      kv += x * k[r];
      qv += x * q[r];
    }
    const float uj = beta * (v[j] - kv);
    for (r = 0; r + nl <= K; r += nl) {
      const auto x = hn::Mul(hn::LoadU(d, s + r), hn::LoadU(d, decay + r));
      hn::StoreU(hn::MulAdd(hn::Set(d, uj), hn::LoadU(d, k + r), x), d, s + r);
    }
    for (; r < K; ++r) s[r] = s[r] * decay[r] + uj * k[r];
    o[j] = qv + kq * uj;
  }
}

// The lane sums of four vectors, in lanes 0-3 of out (G < 4: the first G; the rest of v is ignored). Within each
// 128-bit block a 4 x 4 transpose-and-add (a0+a2, b0+b2, a1+a3, b1+b3 | ... -> sum a, sum b, sum c, sum d per
// block), then the blocks folded pairwise: 2-3 operations a vector where a lane sum of each takes ~9. (One lane:
// the lanes themselves.)
template <int G, class D>
HWY_INLINE void SumsOf4(D d, const hn::Vec<D>* v, float* out) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  for (int g = 0; g < G; ++g) out[g] = hn::GetLane(v[g]);
#else
  const hn::Repartition<double, D> dd;
  const auto z = hn::Zero(d);
  const auto a = v[0], b = G > 1 ? v[1] : z, c = G > 2 ? v[2] : z, e = G > 3 ? v[3] : z;
  const auto ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  const auto ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  const auto lo = hn::BitCast(d, hn::InterleaveLower(dd, hn::BitCast(dd, ab), hn::BitCast(dd, ce)));
  const auto hi = hn::BitCast(d, hn::InterleaveUpper(dd, hn::BitCast(dd, ab), hn::BitCast(dd, ce)));
  auto s = hn::Add(lo, hi);  // per block: sum a, sum b, sum c, sum e over its 4 lanes
  alignas(64) float blocks[hn::MaxLanes(d)];
  hn::Store(s, d, blocks);
  const int64_t nb = static_cast<int64_t>(hn::Lanes(d)) / 4;
  for (int g = 0; g < G; ++g) {
    float t = blocks[g];
    for (int64_t k = 1; k < nb; ++k) t += blocks[4 * k + g];
    out[g] = t;
  }
#endif
}

// Rows j0 .. j0 + G - 1 of decayed_dots2, the first `nstep` of them stepped by r: one pass over the columns
// with r, a and b loaded once for all G rows.
template <int G, class D>
HWY_INLINE void DecayedDotsGroup(D d, int64_t cols, float* X, int64_t ldx, int nstep, const float* r, const float* a,
                                 const float* b, float* out_a, float* out_b) {
  using V = hn::Vec<D>;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  V sa[G], sb[G];
  for (int g = 0; g < G; ++g) sa[g] = sb[g] = hn::Zero(d);
  int64_t c = 0;
  for (; c + nl <= cols; c += nl) {
    const V av = hn::LoadU(d, a + c), bv = hn::LoadU(d, b + c);
    const V rv = nstep > 0 ? hn::LoadU(d, r + c) : av;
    for (int g = 0; g < G; ++g) {
      float* x = X + g * ldx + c;
      V xv = hn::LoadU(d, x);
      if (g < nstep) {
        xv = hn::Mul(xv, rv);
        hn::StoreU(xv, d, x);
      }
      sa[g] = hn::MulAdd(xv, av, sa[g]);
      sb[g] = hn::MulAdd(xv, bv, sb[g]);
    }
  }
  SumsOf4<G>(d, sa, out_a);
  SumsOf4<G>(d, sb, out_b);
  for (; c < cols; ++c) {
    for (int g = 0; g < G; ++g) {
      float& x = X[g * ldx + c];
      if (g < nstep) x *= r[c];
      out_a[g] += x * a[c];
      out_b[g] += x * b[c];
    }
  }
}

// kernels/simd.h decayed_dots2. Rows in groups of four: each column vector of r, a and b loaded once for the
// group, every row's vector stepped (and stored), and two lane-wise FMA chains x * a, x * b; the groups' lane
// sums side by side (SumsOf4), a column tail added in order. One row at a time, with a running decay D beside
// X and a lane sum per dot, the function took 5.4 us of a 42.8 us KDA bf16 step (perf, Intel Xeon with AMX).
void DecayedDots2(int64_t rows, int64_t cols, float* X, int64_t ldx, const float* r, const float* a, const float* b,
                  float* out_a, float* out_b) {
  for (int64_t j0 = 0; j0 < rows; j0 += 4) {
    const int g = static_cast<int>(std::min<int64_t>(4, rows - j0));
    // rows j < rows - 1 are stepped when r is given; the last row is row i's own
    const int nstep = r ? static_cast<int>(std::min<int64_t>(g, rows - 1 - j0)) : 0;
    float* x = X + j0 * ldx;
    const hn::ScalableTag<float> d;
    switch (g) {
      case 4: DecayedDotsGroup<4>(d, cols, x, ldx, nstep, r, a, b, out_a + j0, out_b + j0); break;
      case 3: DecayedDotsGroup<3>(d, cols, x, ldx, nstep, r, a, b, out_a + j0, out_b + j0); break;
      case 2: DecayedDotsGroup<2>(d, cols, x, ldx, nstep, r, a, b, out_a + j0, out_b + j0); break;
      default: DecayedDotsGroup<1>(d, cols, x, ldx, nstep, r, a, b, out_a + j0, out_b + j0); break;
    }
  }
}

// kernels/simd.h chain_products. Four column vectors at a time, each carried down the rows in a register (four
// independent multiply chains): one load of f and one store a row and vector, where one scale_rows call a row
// reloaded the previous row and paid a call for every 128 products.
void ChainProducts(int64_t n, int64_t cols, float* out, int64_t ldo, const float* f, int64_t ldf) {
  const hn::ScalableTag<float> d;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + 4 * nl <= cols; c += 4 * nl) {
    auto v0 = hn::LoadU(d, out + c), v1 = hn::LoadU(d, out + c + nl);
    auto v2 = hn::LoadU(d, out + c + 2 * nl), v3 = hn::LoadU(d, out + c + 3 * nl);
    for (int64_t r = 1; r < n; ++r) {
      const float* fr = f + r * ldf + c;
      float* o = out + r * ldo + c;
      v0 = hn::Mul(v0, hn::LoadU(d, fr));
      v1 = hn::Mul(v1, hn::LoadU(d, fr + nl));
      v2 = hn::Mul(v2, hn::LoadU(d, fr + 2 * nl));
      v3 = hn::Mul(v3, hn::LoadU(d, fr + 3 * nl));
      hn::StoreU(v0, d, o);
      hn::StoreU(v1, d, o + nl);
      hn::StoreU(v2, d, o + 2 * nl);
      hn::StoreU(v3, d, o + 3 * nl);
    }
  }
  for (; c + nl <= cols; c += nl) {
    auto v = hn::LoadU(d, out + c);
    for (int64_t r = 1; r < n; ++r) {
      v = hn::Mul(v, hn::LoadU(d, f + r * ldf + c));
      hn::StoreU(v, d, out + r * ldo + c);
    }
  }
  for (; c < cols; ++c) {
    for (int64_t r = 1; r < n; ++r) out[r * ldo + c] = out[(r - 1) * ldo + c] * f[r * ldf + c];
  }
}

// dst[c, r] = src[r, c] * f(r, c) (kernels/pack.h): 4 x 4 tiles through 128-bit registers (four rows'
// 4-float pieces, scaled, interleaved into four columns' pieces: 4 stores for 16 elements instead of 16
// scattered ones; the scalar loop measured ~5 us for a 64 x 128 panel), the edges element by element. The
// products are the definition's, so the bits are the reference set's.
void PackTransposed(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                    float* dst, int64_t ldd) {
  const auto f = [&](int64_t r, int64_t c) { return scale ? scale[r * sw + (sw == 1 ? 0 : c)] : 1.0f; };
  int64_t r = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Full128<float> d4;
  const auto factors = [&](int64_t row, int64_t c) {
    return scale && sw != 1 ? hn::LoadU(d4, scale + row * sw + c) : hn::Set(d4, f(row, c));
  };
  for (; r + 4 <= rows; r += 4) {
    int64_t c = 0;
    for (; c + 4 <= cols; c += 4) {
      const auto v0 = hn::Mul(hn::LoadU(d4, src + r * lds + c), factors(r, c));
      const auto v1 = hn::Mul(hn::LoadU(d4, src + (r + 1) * lds + c), factors(r + 1, c));
      const auto v2 = hn::Mul(hn::LoadU(d4, src + (r + 2) * lds + c), factors(r + 2, c));
      const auto v3 = hn::Mul(hn::LoadU(d4, src + (r + 3) * lds + c), factors(r + 3, c));
      const auto t0 = hn::InterleaveLower(d4, v0, v1), t1 = hn::InterleaveLower(d4, v2, v3);  // a0 b0 a1 b1, c0 d0 c1 d1
      const auto t2 = hn::InterleaveUpper(d4, v0, v1), t3 = hn::InterleaveUpper(d4, v2, v3);  // a2 b2 a3 b3, c2 d2 c3 d3
      hn::StoreU(hn::ConcatLowerLower(d4, t1, t0), d4, dst + c * ldd + r);
      hn::StoreU(hn::ConcatUpperUpper(d4, t1, t0), d4, dst + (c + 1) * ldd + r);
      hn::StoreU(hn::ConcatLowerLower(d4, t3, t2), d4, dst + (c + 2) * ldd + r);
      hn::StoreU(hn::ConcatUpperUpper(d4, t3, t2), d4, dst + (c + 3) * ldd + r);
    }
    for (; c < cols; ++c) {
      for (int64_t i = r; i < r + 4; ++i) dst[c * ldd + i] = src[i * lds + c] * f(i, c);
    }
  }
#endif
  for (; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c] * f(r, c);
  }
}

// bf16 -> fp32: the 16 bits become the high half of the float (exact).
void Bf16ToF32(int64_t n, const uint16_t* src, float* dst) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(LoadF32(df, src + i), df, dst + i);
  for (; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i]);
}

// kernels/simd.h bf16_rows_scaled: each vector widened (the 16 bits become the float's high half, exact) and
// multiplied by the row's factor, then by s: the two multiplies of widening a row and then scaling it twice.
void Bf16RowsScaled(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, const float* f, float s, float* dst,
                    int64_t ldd) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const auto sv = hn::Set(df, s);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* x = src + r * lds;
    float* y = dst + r * ldd;
    const auto fv = hn::Set(df, f[r]);
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) {
      hn::StoreU(hn::Mul(hn::Mul(LoadF32(df, x + c), fv), sv), df, y + c);
    }
    for (; c < cols; ++c) y[c] = (bf16_bits_to_f32(x[c]) * f[r]) * s;
  }
}

// x rounded to bf16 in fp32 storage, lane-wise as round_bf16 (RoundBf16: F32ToBf16's rounding, kept in place
// with zero low bits).
void RoundBf16Rows(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < rows; ++r) {
    const float* sr = src + r * lds;
    float* dr = dst + r * ldd;
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) hn::StoreU(RoundBf16(df, hn::LoadU(df, sr + c)), df, dr + c);
    for (; c < cols; ++c) dr[c] = round_bf16(sr[c]);
  }
}

// The portable bf16 GEMMs: operands rounded (or bf16 rows widened) into copies on vectors, then this
// target's fp32 GEMM. (The rounding ran element by element before: a 64-row GDN chunk step in bf16 mode on
// this set measured gemm 117-135 us against exact mode's 47, in cache.)
void GemmNNBf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                bool accumulate, float* C, int64_t ldc) {
  gemm_bf16_by_rounding(&GemmNN, &RoundBf16Rows, false, M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void GemmTNBf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                bool accumulate, float* C, int64_t ldc) {
  gemm_bf16_by_rounding(&GemmTN, &RoundBf16Rows, true, M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void PackBf16(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out) {
  pack_bf16_by_rounding(&RoundBf16Rows, Kd, N, B, ldb, out);
}

void GemmPackedBf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                    bool accumulate, float* C, int64_t ldc) {
  gemm_packed_bf16_by_rounding(&GemmNN, &RoundBf16Rows, M, N, Kd, A, lda, B, accumulate, C, ldc);
}

// fp32 -> bf16 bit patterns (StoreBf16Bits).
void F32ToBf16(int64_t n, const float* src, uint16_t* dst) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + nl <= n; i += nl) StoreBf16Bits(df, hn::LoadU(df, src + i), dst + i);
  for (; i < n; ++i) dst[i] = f32_to_bf16_bits(src[i]);
}

// KernelSet::scale_rows_bf16 in one pass: each element's product (ScaleRows' one multiply; sw <= 1: the row's
// factor, else the element's) rounded on its way to the store as F32ToBf16 rounds it, where the default wrote
// the products to an fp32 copy and converted that row by row (KDA's bf16 step on this set, in cache: its three
// calls, K o e^G, Q o e^G and K o e^{G_last - G}, are most of its vector part).
void ScaleRowsBf16(const KernelSet&, int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale,
                   int64_t sw, uint16_t* dst, int64_t ldd) {
  const hn::ScalableTag<float> df;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * lds;
    const float* f = scale + r * sw;
    uint16_t* y = dst + r * ldd;
    const auto row_factor = hn::Set(df, f[0]);
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) {
      StoreBf16Bits(df, hn::Mul(hn::LoadU(df, x + c), sw <= 1 ? row_factor : hn::LoadU(df, f + c)), y + c);
    }
    for (; c < cols; ++c) y[c] = f32_to_bf16_bits(x[c] * f[sw <= 1 ? 0 : c]);
  }
}

// kernels/simd.h bf16_to_f32_rows / f32_to_bf16_rows: the row conversions inlined into one loop over the rows
// (a chunk's 64 rows of 128 converted one call a row took 0.74 us in cache on the Intel Xeon with AMX, in one
// loop 0.29 us).
void Bf16ToF32Rows(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) Bf16ToF32(cols, src + r * lds, dst + r * ldd);
}
void F32ToBf16Rows(int64_t rows, int64_t cols, const float* src, int64_t lds, uint16_t* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) F32ToBf16(cols, src + r * lds, dst + r * ldd);
}

// x - bf16(x), lane-wise: bf16(x) is RoundedBf16Bits's upper half as in F32ToBf16, kept as an fp32 with zero
// low bits. A NaN or infinite x, or one that rounds to infinity, gives a non-finite lo, as in
// the reference set.
void Bf16Residual(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(df));
  const auto high = hn::Set(du32, 0xFFFF0000u);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    float* lr = lo + r * ldl;
    int64_t c = 0;
    for (; c + nl <= cols; c += nl) {
      const auto v = hn::LoadU(df, xr + c);
      const auto u = hn::BitCast(du32, v);
      const auto hi = hn::And(RoundedBf16Bits(du32, u), high);
      hn::StoreU(hn::Sub(v, hn::BitCast(df, hi)), df, lr + c);
    }
    for (; c < cols; ++c) lr[c] = xr[c] - round_bf16(xr[c]);
  }
}

// G diagonal blocks' forward substitution by rows (each m x m, at A + k B (lda + 1), T + k B (ldt + 1)): row i's
// entries j < i at once,
//   T_i[j] = -(A_ij + sum_{j<r<i} A_ir T_rj),
// each lane j taking term r only where r > j (a lane mask per r), in ascending r, the product rounded and
// then added: the reference loop's operations on every element, so its bits. The product is selected
// before the addition so that the compiler cannot fuse the two into an FMA (it does fuse a plain
// Add(acc, Mul(a, t))), and the mask keeps a lane's sum untouched where it has no term (adding a zero
// would turn a -0 into +0). The rows run in zeroed local blocks padded to kTrilBlock columns: no read
// outside A's strictly lower part, no write outside T's lower part. Rows depend on the rows above, so one
// block's row is a chain of one add per term; the G blocks' chains are independent and run side by side
// (measured, a 64 x 64 inverse's four diagonal blocks in cache: 0.69 us one block a call).
template <int G>
HWY_INLINE void DiagonalBlocks(int64_t m, const float* A, int64_t lda, float* T, int64_t ldt) {
  constexpr int64_t B = kTrilBlock;
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float a[G][B * B] = {};
  HWY_ALIGN float t[G][B * B] = {};
  for (int k = 0; k < G; ++k) {
    const float* Ak = A + k * B * (lda + 1);
    for (int64_t i = 1; i < m; ++i) std::copy(Ak + i * lda, Ak + i * lda + i, a[k] + i * B);
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < i; c += nl) {  // lanes j in [c, c + nl)
      V acc[G];
      for (int k = 0; k < G; ++k) acc[k] = hn::Load(d, a[k] + i * B + c);
      for (int64_t r = c + 1; r < i; ++r) {
        const auto reach = hn::FirstN(d, static_cast<size_t>(r - c));  // lanes j < r
        for (int k = 0; k < G; ++k) {
          const auto term =
              hn::IfThenElseZero(reach, hn::Mul(hn::Set(d, a[k][i * B + r]), hn::Load(d, t[k] + r * B + c)));
          acc[k] = hn::IfThenElse(reach, hn::Add(acc[k], term), acc[k]);
        }
      }
      for (int k = 0; k < G; ++k) hn::Store(hn::Neg(acc[k]), d, t[k] + i * B + c);
    }
    for (int k = 0; k < G; ++k) {
      float* Tk = T + k * B * (ldt + 1);
      std::copy(t[k] + i * B, t[k] + i * B + i, Tk + i * ldt);
      Tk[i * ldt + i] = 1.0f;
    }
  }
}

// kernels/simd.h tril_diagonal_blocks: the full blocks four at a time, a last partial block on its own.
void TrilDiagonalBlocks(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt) {
  constexpr int64_t B = kTrilBlock;
  const int64_t full = n / B;
  for (int64_t b = 0; b < full; b += 4) {
    const float* Ab = A + b * B * (lda + 1);
    float* Tb = T + b * B * (ldt + 1);
    switch (std::min<int64_t>(4, full - b)) {
      case 4: DiagonalBlocks<4>(B, Ab, lda, Tb, ldt); break;
      case 3: DiagonalBlocks<3>(B, Ab, lda, Tb, ldt); break;
      case 2: DiagonalBlocks<2>(B, Ab, lda, Tb, ldt); break;
      default: DiagonalBlocks<1>(B, Ab, lda, Tb, ldt); break;
    }
  }
  if (n > full * B) DiagonalBlocks<1>(n - full * B, A + full * B * (lda + 1), lda, T + full * B * (ldt + 1), ldt);
}

// kernels/simd.h gate_cumsum: row i = row i - 1 + the widened gates (a float widens to double exactly, and
// each double addition is the scalar loop's), a double vector of channels at a time.
void GateCumsum(int64_t L, int64_t w, const float* g, double* G) {
  const hn::ScalableTag<double> d64;
  const hn::Rebind<float, decltype(d64)> d32;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d64));
  for (int64_t i = 0; i < L; ++i) {
    const float* gi = g + i * w;
    double* Gi = G + i * w;
    const double* prev = i > 0 ? Gi - w : nullptr;
    int64_t d = 0;
    for (; d + nl <= w; d += nl) {
      const auto x = hn::PromoteTo(d64, hn::LoadU(d32, gi + d));
      hn::StoreU(hn::Add(prev ? hn::LoadU(d64, prev + d) : hn::Zero(d64), x), d64, Gi + d);
    }
    for (; d < w; ++d) Gi[d] = (prev ? prev[d] : 0.0) + gi[d];
  }
}

// kernels/simd.h kda_gate_factors, a column block (a float vector of channels, or one channel at a tail) at a
// time down the chunk's rows and back up: the cumsum G runs in double registers and is never stored (the rows
// by_parts stores as [L, w] doubles, 64 KiB at L = 64, w = 128, more than L1), every value the same operations
// in the same order as kda_gate_factors_by_parts on this set's entries (gate_cumsum's double additions from
// 0.0, exp_f32 / exp_diff's Exp of the demoted double, chain_products' multiplies), so the same bits; only
// the eg_last anchors' G rows are kept, in `anchors` [ceil(L / kDecayAnchorRows), 2 nd] doubles.
// DF: the float tag of the block; G in DD double vectors, two per float vector (its DH halves, kSplit) or one lane.
template <bool kSplit, class DF, class DD, class DH>
HWY_INLINE void GateFactorsBlock(int64_t L, int64_t w, const float* g, float* ga, float* eg, float* eg_last,
                                 float* g_last, double* anchors) {
  const DF df;
  const DD dd;
  const DH dh;
  using VF = hn::Vec<DF>;
  using VD = hn::Vec<DD>;
  constexpr int64_t A = kDecayAnchorRows;
  const int64_t nd = static_cast<int64_t>(hn::Lanes(dd));
  (void)dh;
  const auto widen = [&](VF v, VD* lo, VD* hi) {
    if constexpr (kSplit) {
#if HWY_TARGET != HWY_SCALAR
      *lo = hn::PromoteTo(dd, hn::LowerHalf(dh, v));
      *hi = hn::PromoteTo(dd, hn::UpperHalf(dh, v));
#endif
    } else {
      (void)hi;
      *lo = hn::PromoteTo(dd, v);
    }
  };
  // exp(float(x)) of the double lanes (lo, hi): ExpDiff's demote-and-combine, then Exp on the float vector.
  const auto exp_of = [&](VD lo, VD hi) {
    if constexpr (kSplit) {
#if HWY_TARGET != HWY_SCALAR
      return ExpOf(df, hn::Combine(df, hn::DemoteTo(dh, hi), hn::DemoteTo(dh, lo)));
#endif
    } else {
      (void)hi;
      return ExpOf(df, hn::DemoteTo(df, lo));
    }
  };
  VD Glo = hn::Zero(dd), Ghi = hn::Zero(dd);
  VF egv = hn::Zero(df);
  for (int64_t i = 0; i < L; ++i) {
    const VF gv = hn::LoadU(df, g + i * w);
    VD xlo, xhi = hn::Zero(dd);
    widen(gv, &xlo, &xhi);
    Glo = hn::Add(Glo, xlo);
    Ghi = hn::Add(Ghi, xhi);
    const VF gav = ExpOf(df, gv);
    hn::StoreU(gav, df, ga + i * w);
    egv = i % A == 0 ? exp_of(Glo, Ghi) : hn::Mul(egv, gav);  // an anchor, or the running product
    hn::StoreU(egv, df, eg + i * w);
    if ((L - 1 - i) % A == 0) {  // an anchor of eg_last: keep G_i
      double* keep = anchors + (L - 1 - i) / A * 2 * nd;
      hn::StoreU(Glo, dd, keep);
      hn::StoreU(Ghi, dd, keep + nd);
    }
  }
  hn::StoreU(exp_of(Glo, Ghi), df, g_last);
  // Up the rows: eg_last_a = exp(G_last - G_a) at each anchor a, then eg_last_i = eg_last_{i+1} ga_{i+1} above it.
  for (int64_t a = L - 1; a >= 0; a -= A) {
    const double* keep = anchors + (L - 1 - a) / A * 2 * nd;
    VF v = exp_of(hn::Sub(Glo, hn::LoadU(dd, keep)), hn::Sub(Ghi, hn::LoadU(dd, keep + nd)));
    hn::StoreU(v, df, eg_last + a * w);
    for (int64_t i = a - 1; i >= 0 && i > a - A; --i) {
      v = hn::Mul(v, hn::LoadU(df, ga + (i + 1) * w));
      hn::StoreU(v, df, eg_last + i * w);
    }
  }
}

void KdaGateFactors(const KernelSet&, int64_t L, int64_t w, const float* g, float* ga, float* eg, float* eg_last,
                    float* g_last) {
  if (L <= 0) return;
  thread_local AlignedVector<double> anchors;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  anchors.resize(static_cast<std::size_t>(((L + kDecayAnchorRows - 1) / kDecayAnchorRows) * 2 * nl));
  int64_t c = 0;
#if HWY_TARGET != HWY_SCALAR
  using DF = hn::ScalableTag<float>;
  for (; c + nl <= w; c += nl) {
    GateFactorsBlock<true, DF, hn::Repartition<double, DF>, hn::Half<DF>>(L, w, g + c, ga + c, eg + c, eg_last + c,
                                                                         g_last + c, anchors.data());
  }
#endif
  using D1 = hn::CappedTag<float, 1>;
  for (; c < w; ++c) {
    GateFactorsBlock<false, D1, hn::CappedTag<double, 1>, D1>(L, w, g + c, ga + c, eg + c, eg_last + c, g_last + c,
                                                              anchors.data());
  }
}

void GemmBf16Rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                  bool accumulate, float* C, int64_t ldc, RowScale rs) {
  gemm_bf16_rows_by_widening(&GemmNN, &Bf16ToF32, M, N, Kd, A, lda, B, accumulate, C, ldc, rs);
}

void GemmBf16RowsTn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                    const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs) {
  gemm_bf16_rows_tn_by_widening(&GemmTN, &Bf16ToF32, M, N, Kd, X, ldx, nterms, B, accumulate, C, ldc, rs);
}

void PackBf16RowsT(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  pack_bf16_rows_t_by_widening(&Bf16ToF32, &PackTransposed, N, Kd, X, ldx, out);
}

int64_t ColumnBlockWidth() { return 2 * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

KernelSet MakeKernelSet() {
  KernelSet ks{TargetName(), ColumnBlockWidth(), &GemmNN,       &GemmTN,       &SumSquaresRows, &SumSquaresRowsBf16,
          &ExpF32,
          &ScaleRows,   &BetaResidual,      &DecodeKFirst, &DecodeVFirst, &DecayedDots2,   &FmaPeak,
          &GemmNNBf16,  &GemmTNBf16,        &PackBf16,   &GemmPackedBf16, &Bf16ToF32, &F32ToBf16,
          &DecayMask, &ExpDiff, &PackBf16RowsT, &GemmBf16Rows, &GemmBf16RowsTn, &PackTransposed,
          &Bf16Residual, &pack_bf16_split_by_parts<&PackBf16, &Bf16Residual>, &RoundBf16Rows,
          &lower_times_bf16_by_blocks<&GemmPackedBf16>, &TrilDiagonalBlocks,
          &GateCumsum, &ChainProducts, &Bf16RowsScaled, &Bf16ToF32Rows, &F32ToBf16Rows,
          "fp32 FMA on rounded operands", nullptr};
  ks.kda_gate_factors = &KdaGateFactors;
  ks.gemm_scaled_acc = &GemmScaledAcc;
  ks.scale_rows_bf16 = &ScaleRowsBf16;
  return ks;
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hanpu {
namespace simd {

HWY_EXPORT(MakeKernelSet);

// One set per compiled target this CPU supports, best first: dispatch once per target, with the supported
// targets narrowed to it, to read that target's table.
void append_sets(std::vector<KernelSet>* out) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().DeInit();
    out->push_back(HWY_DYNAMIC_DISPATCH(MakeKernelSet)());
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().DeInit();
}

const char* target_name() { return active_kernels().name.c_str(); }
int64_t gemm_column_block() { return active_kernels().gemm_column_block; }

void gemm_nn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc) {
  active_kernels().gemm_nn(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tn(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
             bool accumulate, float* C, int64_t ldc) {
  active_kernels().gemm_tn(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_scaled_acc(bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B,
                     int64_t ldb, float* C, int64_t ldc, RowScale rs) {
  const KernelSet& k = active_kernels();
  k.gemm_scaled_acc(k, trans_a, M, N, Kd, A, lda, B, ldb, C, ldc, rs);
}

void gemm_nn_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                  bool accumulate, float* C, int64_t ldc) {
  active_kernels().gemm_nn_bf16(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void gemm_tn_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const float* B, int64_t ldb,
                  bool accumulate, float* C, int64_t ldc) {
  active_kernels().gemm_tn_bf16(M, N, Kd, A, lda, B, ldb, accumulate, C, ldc);
}

void pack_bf16(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out) {
  active_kernels().pack_bf16(Kd, N, B, ldb, out);
}

// A packed product outside its operand is a programming error: say so and stop.
static void check_packed_call(int64_t N, int64_t Kd, const Bf16Operand& B) {
  if (N > B.N || Kd > B.Kd || (Kd % 2 != 0 && Kd != B.Kd)) {
    std::fprintf(stderr, "hanpu: packed bf16 product called with N = %lld, Kd = %lld on a packed [%lld, %lld] operand\n",
                 static_cast<long long>(N), static_cast<long long>(Kd), static_cast<long long>(B.Kd),
                 static_cast<long long>(B.N));
    std::abort();
  }
}

// So is a multi-term product with no term or more than kMaxLowerTerms.
static void check_terms(const char* entry, int nterms) {
  if (nterms < 1 || nterms > kMaxLowerTerms) {
    std::fprintf(stderr, "hanpu: %s called with %d terms (1 to %d)\n", entry, nterms, kMaxLowerTerms);
    std::abort();
  }
}

void gemm_packed_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                      bool accumulate, float* C, int64_t ldc) {
  check_packed_call(N, Kd, B);
  active_kernels().gemm_packed_bf16(M, N, Kd, A, lda, B, accumulate, C, ldc);
}

void gemm_packed_bf16_carrying(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B,
                               bool accumulate, float* C, int64_t ldc, VectorFiller* filler) {
  check_packed_call(N, Kd, B);
  const KernelSet& k = active_kernels();
  k.gemm_packed_bf16_carrying(k, M, N, Kd, A, lda, B, accumulate, C, ldc, filler);
  if (!filler) return;
  while (!filler->done) filler->done = !filler->step(filler->ctx);
}

void lower_times_bf16(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool accumulate, float* C,
                      int64_t ldc) {
  check_terms("lower_times_bf16", nterms);
  for (int k = 0; k < nterms; ++k) check_packed_call(N, L, *terms[k].B);
  active_kernels().lower_times_bf16(L, N, nterms, terms, accumulate, C, ldc);
}

void residual_split_bf16_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                              const float* s, const float* beta, const float* V, Bf16Operand* hi, Bf16Operand* lo) {
  check_packed_call(N, Kd, B);
  const KernelSet& k = active_kernels();
  k.residual_split_bf16_rows(k, M, N, Kd, A, lda, B, s, beta, V, hi, lo);
}

void lower_times_split_bf16(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, Bf16Operand* hi,
                            Bf16Operand* lo, const float* scale, const float* rowscale, Bf16Operand* scaled) {
  check_terms("lower_times_split_bf16", nterms);
  for (int k = 0; k < nterms; ++k) check_packed_call(N, L, *terms[k].B);
  const KernelSet& k = active_kernels();
  k.lower_times_split_bf16(k, L, N, nterms, terms, hi, lo, scale, rowscale, scaled);
}

void scale_rows_bf16(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     uint16_t* dst, int64_t ldd) {
  const KernelSet& k = active_kernels();
  k.scale_rows_bf16(k, rows, cols, src, lds, scale, sw, dst, ldd);
}

void gemm_terms_bf16(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, bool trans_a, int nterms,
                     const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs) {
  check_terms("gemm_terms_bf16", nterms);
  for (int k = 0; k < nterms; ++k) check_packed_call(N, Kd, *B[k]);
  const KernelSet& k = active_kernels();
  k.gemm_terms_bf16(k, M, N, Kd, A, lda, trans_a, nterms, B, accumulate, C, ldc, rs);
}

void bf16_to_f32(int64_t n, const uint16_t* src, float* dst) { active_kernels().bf16_to_f32(n, src, dst); }
void f32_to_bf16(int64_t n, const float* src, uint16_t* dst) { active_kernels().f32_to_bf16(n, src, dst); }
void chain_products(int64_t n, int64_t cols, float* out, int64_t ldo, const float* f, int64_t ldf) {
  active_kernels().chain_products(n, cols, out, ldo, f, ldf);
}
void bf16_rows_scaled(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, const float* f, float s, float* dst,
                      int64_t ldd) {
  active_kernels().bf16_rows_scaled(rows, cols, src, lds, f, s, dst, ldd);
}
void bf16_to_f32_rows(int64_t rows, int64_t cols, const uint16_t* src, int64_t lds, float* dst, int64_t ldd) {
  active_kernels().bf16_to_f32_rows(rows, cols, src, lds, dst, ldd);
}
void f32_to_bf16_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, uint16_t* dst, int64_t ldd) {
  active_kernels().f32_to_bf16_rows(rows, cols, src, lds, dst, ldd);
}

void decay_mask(int64_t L, const double* G, const float* cf, const float* ra, const float* rp, float* a, float* p,
                int64_t ld) {
  active_kernels().decay_mask(L, G, cf, ra, rp, a, p, ld);
}

void pack_bf16_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  active_kernels().pack_bf16_rows_t(N, Kd, X, ldx, out);
}

void gemm_bf16_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B,
                    bool accumulate, float* C, int64_t ldc, RowScale rs) {
  check_packed_call(N, Kd, B);
  active_kernels().gemm_bf16_rows(M, N, Kd, A, lda, B, accumulate, C, ldc, rs);
}

void gemm_bf16_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                       const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs) {
  check_terms("gemm_bf16_rows_tn", nterms);
  for (int k = 0; k < nterms; ++k) check_packed_call(N, Kd, *B[k]);
  active_kernels().gemm_bf16_rows_tn(M, N, Kd, X, ldx, nterms, B, accumulate, C, ldc, rs);
}

void exp_diff(int64_t rows, int64_t cols, const double* Ga, int64_t sa, const double* Gb, int64_t sb, float* out) {
  active_kernels().exp_diff(rows, cols, Ga, sa, Gb, sb, out);
}

void bf16_residual(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* lo, int64_t ldl) {
  active_kernels().bf16_residual(rows, cols, x, ldx, lo, ldl);
}

void pack_bf16_split(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo) {
  active_kernels().pack_bf16_split(Kd, N, X, ldx, hi, lo);
}

void tril_diagonal_blocks(int64_t n, const float* A, int64_t lda, float* T, int64_t ldt) {
  active_kernels().tril_diagonal_blocks(n, A, lda, T, ldt);
}

void gate_cumsum(int64_t L, int64_t w, const float* g, double* G) { active_kernels().gate_cumsum(L, w, g, G); }

void kda_gate_factors(int64_t L, int64_t w, const float* g, float* ga, float* eg, float* eg_last, float* g_last) {
  const KernelSet& ks = active_kernels();
  ks.kda_gate_factors(ks, L, w, g, ga, eg, eg_last, g_last);
}

}  // namespace simd

void pack_transposed(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                     float* dst, int64_t ldd) {
  active_kernels().pack_transposed(rows, cols, src, lds, scale, sw, dst, ldd);
}

namespace simd {

double sum_squares(int64_t n, const float* x) {
  double s;
  active_kernels().sum_squares_rows(1, n, x, n, &s);
  return s;
}
void sum_squares_rows(int64_t rows, int64_t n, const float* x, int64_t ldx, double* out) {
  active_kernels().sum_squares_rows(rows, n, x, ldx, out);
}

void sum_squares_rows_bf16(int64_t rows, int64_t n, const uint16_t* x, int64_t ldx, double* out) {
  active_kernels().sum_squares_rows_bf16(rows, n, x, ldx, out);
}
void exp_f32(int64_t n, const float* x, float* y) { active_kernels().exp_f32(n, x, y); }

void scale_rows(int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
                const float* rowscale, float* dst, int64_t ldd) {
  active_kernels().scale_rows(rows, cols, src, lds, scale, sw, rowscale, dst, ldd);
}

void beta_residual(int64_t rows, int64_t cols, const float* beta, const float* v, const float* ks, float* out) {
  active_kernels().beta_residual(rows, cols, beta, v, ks, out);
}

void decode_k_first(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                    const float* v, float beta, float* o) {
  active_kernels().decode_k_first(K, V, S, lds, decay, q, k, v, beta, o);
}

void decode_v_first(int64_t K, int64_t V, float* S, int64_t lds, const float* decay, const float* q, const float* k,
                    const float* v, float beta, float* o) {
  active_kernels().decode_v_first(K, V, S, lds, decay, q, k, v, beta, o);
}

void decayed_dots2(int64_t rows, int64_t cols, float* X, int64_t ldx, const float* r, const float* a, const float* b,
                   float* out_a, float* out_b) {
  active_kernels().decayed_dots2(rows, cols, X, ldx, r, a, b, out_a, out_b);
}

double fma_peak_kernel(int64_t iters) { return active_kernels().fma_peak(iters); }

}  // namespace simd

void append_highway_kernel_sets(std::vector<KernelSet>* out) { simd::append_sets(out); }

}  // namespace hanpu
#endif
