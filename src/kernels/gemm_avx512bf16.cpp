// The bf16 GEMMs on AVX512-BF16 (VDPBF16PS: per fp32 lane, acc += a[2i+1] b[2i+1], then + a[2i] b[2i], each
// product exact): AMD Zen 4/5 and Intel Cooper Lake and later. This file is compiled with -mavx512bf16 and
// runs only after the run-time check in append_avx512bf16_kernel_sets; Highway 1.0.3 has no bf16 dot
// product, hence its own translation unit.
//
// C[M, N] (+)= op(A)[M, Kd] B[Kd, N] with Kp = ceil(Kd / 2) pairs along Kd:
//   A is converted to bf16 row-major, row r = Kp 32-bit words (A[r, 2p], A[r, 2p + 1]), one word broadcast
//     per step (a transposed A, stored [Kd, M], is packed like B: its words are already op(A)'s pairs);
//   B is packed to the dot-product layout: word (p, n) = (B[2p, n], B[2p + 1, n]), N padded to 16 lanes;
//   an MR x NV register block accumulates MR rows x NV 16-column vectors over the Kp steps.
// pack_bf16 keeps B in that packed layout for gemm_packed_bf16 (several products, one conversion);
// pack_bf16_split makes a two-term split's both packings in the same pass. bf16 rows already are their
// pairs: gemm_bf16_rows reads them in place, gemm_bf16_rows_tn interleaves two rows into a transposed
// A's panel.
// lower_times_bf16 chains a lower-triangular product's terms (a two-term split's two or three products) in
// the same accumulators, each 8-row block (16 in a one-vector column block) stopping at its diagonal: per
// element the same chain of pairs as one call per term and 16-row block, less the zero products above the
// diagonal.
// Odd Kd and the column tail are zero-padded in the packed copies; the tail's C is read and written under a
// mask. Every output element is one chain over p in order, whatever block it falls in, so column splits
// give identical columns (results are bit-identical for any thread count). Off x86 there is no such set.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "core/aligned.h"
#include "kernels/bf16_pairs.h"
#include "kernels/kernel_set.h"

namespace hanpu {
#if defined(__x86_64__) || defined(__i386__)
namespace {

using bf16_pairs::first_lanes;
using bf16_pairs::kLanes;

// A's words may be read straight from bf16 rows (gemm_rows): a 32-bit view of 16-bit storage.
using Word = uint32_t __attribute__((may_alias));

// 8 rows x 2 vectors: 16 accumulators + 2 B vectors + 1 broadcast of 32 registers. A one-vector column block
// takes 16 rows (then 8, then single rows), so that it too keeps 16 independent chains in flight: VDPBF16PS
// issues two a cycle with a latency of several, and on the AMD EPYC (Zen 5) 8 chains reach 335 GFLOP/s of
// one core's 505 (16 chains; a scratch probe); a GDN step's scores (16-column blocks) 0.95x in cache.
constexpr int kMR = 8;

// Grows a per-thread buffer to n words without initialising or ever shrinking it (every word the
// kernels read is written first).
uint32_t* words(AlignedVector<uint32_t>* buf, int64_t n) {
  if (static_cast<int64_t>(buf->size()) < n) buf->resize(static_cast<std::size_t>(n));
  return buf->data();
}

// B's words (bf16_pairs::pack_pairs without the low term); a transposed A operand (stored [Kd, M]) packs the
// same way, as op(A)'s pairs.
void pack_b(int64_t N, int64_t Kd, const float* B, int64_t ldb, int64_t Np, uint32_t* out) {
  bf16_pairs::pack_pairs(N, Kd, B, ldb, Np, out, nullptr);
}

// One product's operands: A's word (r, p) at a[r * ars + p * aps], B's word (p, n) at b[p * ldb + n].
struct Panel {
  const Word* a;
  int64_t ars, aps;
  const uint32_t* b;
  int64_t ldb;
  Panel at(int64_t row, int64_t col) const { return {a + row * ars, ars, aps, b + col, ldb}; }
};

// C[MR rows, NV vectors] (+)= the nt panels' products over Kp word steps each, chained in registers: every
// element is one chain over the first panel's pairs in order, then the next panel's (the value of one call
// per panel accumulating through C). The last vector's stores and loads are masked to `last` columns. The
// block's row factors rs (RowScale, from the block's first row) multiply the loaded C when accumulating and
// the finished chains otherwise: scale_rows' one multiply, before or after (Scaled: rs.s is not null, a
// separate instantiation so that the unscaled products keep their code). The factors are read from memory
// outside the chains: held in vector registers across them they crowd out B's (measured: K S 20% slower).
template <int MR, int NV, bool Scaled>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline void block(int nt, const Panel* t, int64_t Kp,
                                                                         bool accumulate, float* C, int64_t ldc,
                                                                         __mmask16 last, RowScale rs) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? last : 0xFFFF;
      acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(m, C + r * ldc + v * kLanes) : _mm512_setzero_ps();
      if (Scaled && accumulate) acc[r][v] = _mm512_mul_ps(acc[r][v], _mm512_set1_ps(rs.s[r * rs.stride]));
    }
  }
  for (int k = 0; k < nt; ++k) {
    const Word* Ap = t[k].a;
    const int64_t ars = t[k].ars, aps = t[k].aps, Np = t[k].ldb;
    const uint32_t* Bp = t[k].b;
    for (int64_t p = 0; p < Kp; ++p) {
      __m512i b[NV];
      for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_si512(Bp + p * Np + v * kLanes);
      for (int r = 0; r < MR; ++r) {
        const __m512i a = _mm512_set1_epi32(static_cast<int>(Ap[r * ars + p * aps]));
        for (int v = 0; v < NV; ++v) {
          acc[r][v] = _mm512_dpbf16_ps(acc[r][v], reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b[v]));
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      if (Scaled && !accumulate) acc[r][v] = _mm512_mul_ps(acc[r][v], _mm512_set1_ps(rs.s[r * rs.stride]));
      _mm512_mask_storeu_ps(C + r * ldc + v * kLanes, v == NV - 1 ? last : 0xFFFF, acc[r][v]);
    }
  }
}

// Rows [0, M) of the panels' products in blocks of kMR rows (of 2 kMR first for one vector), then single
// rows. `lower`: A is lower triangular, so rows [i, i + mr) need only the pairs up to column i + mr - 1 and
// the rest (zero products) are skipped. rs: the rows' factors (RowScale; Scaled: not null).
template <int NV, bool Scaled>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void rows(int64_t M, int nt, const Panel* t, int64_t Kp,
                                                                 bool lower, bool accumulate, float* C, int64_t ldc,
                                                                 __mmask16 last, RowScale rs) {
  Panel moved[kMaxLowerTerms];
  const auto shift = [&](int64_t i) {
    for (int k = 0; k < nt; ++k) moved[k] = t[k].at(i, 0);
  };
  const auto steps = [&](int64_t i, int64_t mr) { return lower ? std::min(Kp, (i + mr + 1) / 2) : Kp; };
  const auto from = [&](int64_t i) { return RowScale{Scaled ? rs.s + i * rs.stride : nullptr, rs.stride}; };
  int64_t i = 0;
  if constexpr (NV == 1) {
    for (; i + 2 * kMR <= M; i += 2 * kMR) {
      shift(i);
      block<2 * kMR, 1, Scaled>(nt, moved, steps(i, 2 * kMR), accumulate, C + i * ldc, ldc, last, from(i));
    }
  }
  for (; i + kMR <= M; i += kMR) {
    shift(i);
    block<kMR, NV, Scaled>(nt, moved, steps(i, kMR), accumulate, C + i * ldc, ldc, last, from(i));
  }
  for (; i < M; ++i) {
    shift(i);
    block<1, NV, Scaled>(nt, moved, steps(i, 1), accumulate, C + i * ldc, ldc, last, from(i));
  }
}

// C[M, N] (+)= the sum of the nt panels' products over Kp word steps (B's rows of ldb >= ceil16(N) words),
// with C's row factors rs: 2-vector column blocks, then 16-column vectors with the tail masked.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void multiply(int64_t M, int64_t N, int nt, const Panel* t,
                                                                     int64_t Kp, bool lower, bool accumulate,
                                                                     float* C, int64_t ldc, RowScale rs = {}) {
  Panel moved[kMaxLowerTerms];
  const auto shift = [&](int64_t j) {
    for (int k = 0; k < nt; ++k) moved[k] = t[k].at(0, j);
  };
  int64_t j = 0;
  for (; j + 2 * kLanes <= N; j += 2 * kLanes) {
    shift(j);
    (rs.s ? &rows<2, true> : &rows<2, false>)(M, nt, moved, Kp, lower, accumulate, C + j, ldc, 0xFFFF, rs);
  }
  while (j < N) {
    const int64_t n = N - j;
    const __mmask16 last = first_lanes(n);
    shift(j);
    (rs.s ? &rows<1, true> : &rows<1, false>)(M, nt, moved, Kp, lower, accumulate, C + j, ldc, last, rs);
    j += kLanes;
  }
}

// One product: C[M, N] (+)= op(A) B, with C's row factors rs.
void multiply(int64_t M, int64_t N, int64_t Kp, const Panel& t, bool accumulate, float* C, int64_t ldc,
              RowScale rs = {}) {
  multiply(M, N, 1, &t, Kp, false, accumulate, C, ldc, rs);
}

// op(A)'s words into a per-thread buffer: rows of Kp (ars = Kp, aps = 1), or for a transposed A the
// B-style panel (ars = 1, aps = Mp).
template <bool TransA>
const uint32_t* pack_left(int64_t M, int64_t Kd, const float* A, int64_t lda, int64_t* ars, int64_t* aps) {
  thread_local AlignedVector<uint32_t> abuf;
  const int64_t Kp = (Kd + 1) / 2, Mp = (M + kLanes - 1) / kLanes * kLanes;
  uint32_t* ap = words(&abuf, TransA ? Kp * Mp : M * Kp + kLanes);
  if (TransA) {
    pack_b(M, Kd, A, lda, Mp, ap);
  } else {
    bf16_pairs::pack_rows(M, Kd, A, lda, ap, (Kd + 1) / 2);
  }
  *ars = TransA ? 1 : Kp;
  *aps = TransA ? Mp : 1;
  return ap;
}

template <bool TransA>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemm_bf16(int64_t M, int64_t N, int64_t Kd, const float* A,
                                                                      int64_t lda, const float* B, int64_t ldb,
                                                                      bool accumulate, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  thread_local AlignedVector<uint32_t> bbuf;
  const int64_t Kp = (Kd + 1) / 2, Np = (N + kLanes - 1) / kLanes * kLanes;
  int64_t ars = 0, aps = 0;
  const uint32_t* ap = pack_left<TransA>(M, Kd, A, lda, &ars, &aps);
  uint32_t* bp = words(&bbuf, Kp * Np);
  pack_b(N, Kd, B, ldb, Np, bp);
  multiply(M, N, Kp, Panel{ap, ars, aps, bp, Np}, accumulate, C, ldc);
}

// The packed operand (KernelSet::pack_bf16): pack_b's words, rows of ld = ceil16(N) words.
void pack_operand(int64_t Kd, int64_t N, const float* B, int64_t ldb, Bf16Operand* out) {
  const int64_t Kp = (Kd + 1) / 2, Np = (N + kLanes - 1) / kLanes * kLanes;
  pack_b(N, Kd, B, ldb, Np, reinterpret_cast<uint32_t*>(out->reshape(Kd, N, Np, Kp * Np)));
}

// KernelSet::pack_bf16_split: both packings in one pass over X.
void pack_split(int64_t Kd, int64_t N, const float* X, int64_t ldx, Bf16Operand* hi, Bf16Operand* lo) {
  const int64_t Kp = (Kd + 1) / 2, Np = (N + kLanes - 1) / kLanes * kLanes;
  bf16_pairs::pack_pairs(N, Kd, X, ldx, Np, reinterpret_cast<uint32_t*>(hi->reshape(Kd, N, Np, Kp * Np)),
                   reinterpret_cast<uint32_t*>(lo->reshape(Kd, N, Np, Kp * Np)));
}

void gemm_packed(int64_t M, int64_t N, int64_t Kd, const float* A, int64_t lda, const Bf16Operand& B, bool accumulate,
                 float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  int64_t ars = 0, aps = 0;
  const uint32_t* ap = pack_left<false>(M, Kd, A, lda, &ars, &aps);
  multiply(M, N, (Kd + 1) / 2, Panel{ap, ars, aps, reinterpret_cast<const uint32_t*>(B.data.data()), B.ld}, accumulate,
           C, ldc);
}

// KernelSet::pack_bf16_rows_t: bf16_pairs::pack_rows_t into rows of ceil16(N) words.
void pack_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, Bf16Operand* out) {
  const int64_t Kp = (Kd + 1) / 2, Np = bf16_pairs::round_up(N, kLanes);
  bf16_pairs::pack_rows_t(N, Kd, X, ldx, Np, reinterpret_cast<uint32_t*>(out->reshape(Kd, N, Np, Kp * Np)));
}

// KernelSet::lower_times_bf16: each term's A to bf16 rows once, then every row block's terms chained in
// registers, up to the block's diagonal.
void lower_times(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool accumulate, float* C,
                 int64_t ldc) {
  if (L <= 0 || N <= 0 || nterms <= 0) return;
  thread_local AlignedVector<uint32_t> abuf;
  const int64_t Kp = (L + 1) / 2;
  uint32_t* w = words(&abuf, nterms * L * Kp);
  Panel t[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) {
    bf16_pairs::pack_rows(L, L, terms[k].A, terms[k].lda, w + k * L * Kp, Kp);
    t[k] = {w + k * L * Kp, Kp, 1, reinterpret_cast<const uint32_t*>(terms[k].B->data.data()), terms[k].B->ld};
  }
  multiply(L, N, nterms, t, Kp, true, accumulate, C, ldc);
}

// A as bf16 rows: with even Kd and an even row stride on a 4-byte boundary the rows are their own words
// (no copy); otherwise the pairs are copied with the odd tail zero-padded.
void gemm_rows(int64_t M, int64_t N, int64_t Kd, const uint16_t* A, int64_t lda, const Bf16Operand& B, bool accumulate,
               float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0) return;
  const int64_t Kp = (Kd + 1) / 2;
  const Word* ap = reinterpret_cast<const Word*>(A);
  int64_t ars = lda / 2;
  if (Kd % 2 != 0 || lda % 2 != 0 || reinterpret_cast<uintptr_t>(A) % 4 != 0) {
    thread_local AlignedVector<uint32_t> abuf;
    uint32_t* w = words(&abuf, M * Kp);
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t p = 0; p < Kp; ++p) w[r * Kp + p] = bf16_pairs::pair_word(A + r * lda, p, Kd);
    }
    ap = w;
    ars = Kp;
  }
  multiply(M, N, Kp, Panel{ap, ars, 1, reinterpret_cast<const uint32_t*>(B.data.data()), B.ld}, accumulate, C, ldc, rs);
}

// KernelSet::gemm_bf16_rows_tn: X^T's panel from the bf16 rows once, then the transposed-A product gemm_tn_bf16
// runs (the same words, the same chains), the terms chained in the same accumulators.
void gemm_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int nterms,
                  const Bf16Operand* const* B, bool accumulate, float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0 || nterms <= 0) return;
  thread_local AlignedVector<uint32_t> abuf;
  const int64_t Kp = (Kd + 1) / 2, Mp = (M + kLanes - 1) / kLanes * kLanes;
  uint32_t* ap = words(&abuf, Kp * Mp);
  bf16_pairs::pack_rows_pairs(M, Kd, X, ldx, Mp, ap);
  Panel t[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) t[k] = Panel{ap, 1, Mp, reinterpret_cast<const uint32_t*>(B[k]->data.data()), B[k]->ld};
  multiply(M, N, nterms, t, Kp, false, accumulate, C, ldc, rs);
}

// Twelve independent VDPBF16PS chains in registers: 64 flops per instruction (16 lanes x 2 products x 2).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) double bf16_peak(int64_t iters) {
  __m512 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512i a = _mm512_set1_epi32(0x3F803F80), b = _mm512_set1_epi32(0x3C003C00);  // (1, 1) and (2^-7, 2^-7)
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) {
      acc[k] = _mm512_dpbf16_ps(acc[k], reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
    }
  }
  __m512 sum = acc[0];
  for (int k = 1; k < 12; ++k) sum = _mm512_add_ps(sum, acc[k]);
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  return 64.0 * 12.0 * static_cast<double>(iters);
}

// KernelSet::scale_rows_bf16 on AVX512-BF16: each row's products (scale_rows' one multiply per element)
// rounded as this set's packings round an fp32 operand (VCVTNE2PS2BF16: nearest even, a subnormal to zero),
// 32 columns a step into one 64-byte store, the tail 16 at a time under a mask (VCVTNEPS2BF16, the same
// rounding). (16 columns a step, every step masked: a 64 x 128 block 0.85 us in cache on the Intel Xeon
// with AMX.)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void scale_rows_bf16(
    const KernelSet&, int64_t rows, int64_t cols, const float* src, int64_t lds, const float* scale, int64_t sw,
    uint16_t* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * lds;
    const float* f = scale + r * sw;
    uint16_t* y = dst + r * ldd;
    const __m512 row_factor = _mm512_set1_ps(f[0]);
    int64_t c = 0;
    for (; c + 2 * kLanes <= cols; c += 2 * kLanes) {
      const __m512 f0 = sw <= 1 ? row_factor : _mm512_loadu_ps(f + c);
      const __m512 f1 = sw <= 1 ? row_factor : _mm512_loadu_ps(f + c + kLanes);
      const __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(x + c), f0);
      const __m512 v1 = _mm512_mul_ps(_mm512_loadu_ps(x + c + kLanes), f1);
      _mm512_storeu_si512(y + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0)));
    }
    for (; c < cols; c += kLanes) {
      const __mmask16 m = first_lanes(cols - c);
      const __m512 fc = sw <= 1 ? row_factor : _mm512_maskz_loadu_ps(m, f + c);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c), fc);
      _mm256_mask_storeu_epi16(y + c, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
    }
  }
}

}  // namespace

void append_avx512bf16_kernel_sets(std::vector<KernelSet>* out) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return;
  for (auto it = out->begin(); it != out->end(); ++it) {
    const KernelSet& s = *it;
    if (s.name != "AVX3") continue;
    KernelSet k = s;  // AVX3's entries, with the bf16 GEMMs on the dot-product instruction
    k.name = "AVX3+BF16";
    k.gemm_nn_bf16 = &gemm_bf16<false>;
    k.gemm_tn_bf16 = &gemm_bf16<true>;
    k.pack_bf16 = &pack_operand;
    k.pack_bf16_split = &pack_split;
    k.gemm_packed_bf16 = &gemm_packed;
    k.pack_bf16_rows_t = &pack_rows_t;
    k.gemm_bf16_rows = &gemm_rows;
    k.gemm_bf16_rows_tn = &gemm_rows_tn;
    k.lower_times_bf16 = &lower_times;
    k.scale_rows_bf16 = &scale_rows_bf16;
    k.bf16_unit = "AVX512-BF16 dot products";
    k.bf16_peak = &bf16_peak;
    k.bf16_rate_over_fp32 = 2;
    // First on AMD's cores, whose dot products outrun the FMA, else right behind AVX3 (kernels/kernel_set.h;
    // still registered there: HANPU_KERNELS selects it, its tests run, the AMX set builds on it).
    out->insert(__builtin_cpu_is("amd") ? out->begin() : it + 1, k);
    return;
  }
}

#else
void append_avx512bf16_kernel_sets(std::vector<KernelSet>*) {}
#endif
}  // namespace hanpu
