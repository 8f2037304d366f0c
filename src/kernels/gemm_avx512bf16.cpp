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
// the same accumulators, each 8-row block stopping at its diagonal: per element the same chain of pairs as
// one call per term and 16-row block, less the zero products above the diagonal.
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

#include "kernels/kernel_set.h"

namespace hanpu {
#if defined(__x86_64__) || defined(__i386__)
namespace {

// A's words may be read straight from bf16 rows (gemm_rows): a 32-bit view of 16-bit storage.
using Word = uint32_t __attribute__((may_alias));

constexpr int kMR = 8;  // 8 rows x 2 vectors: 16 accumulators + 2 B vectors + 1 broadcast of 32 registers
constexpr int64_t kLanes = 16;

// The first min(n, 16) of 16 lanes (n >= 1).
inline __mmask16 first_lanes(int64_t n) { return n >= kLanes ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1); }

// Rounds 16 floats (the low `n` of them, the rest zero) and the next 16 (`n2`) to 32 bf16 in order.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i to_bf16_pairs(const float* lo, int64_t n,
                                                                                     const float* hi, int64_t n2) {
  const __m512 x0 = _mm512_maskz_loadu_ps(first_lanes(n), lo);
  const __m512 x1 = n2 <= 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(first_lanes(n2), hi);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));  // lanes 0-15 from x0, 16-31 from x1
}

// Grows a per-thread buffer to n words without initialising or ever shrinking it (every word the
// kernels read is written first).
uint32_t* words(std::vector<uint32_t>* buf, int64_t n) {
  if (static_cast<int64_t>(buf->size()) < n) buf->resize(static_cast<std::size_t>(n));
  return buf->data();
}

// op(A) = A [M, Kd] to bf16 rows of Kp words (row r at r * Kp).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_a(int64_t M, int64_t Kd, const float* A, int64_t lda,
                                                                   uint32_t* out) {
  const int64_t Kp = (Kd + 1) / 2;
  for (int64_t r = 0; r < M; ++r) {
    const float* src = A + r * lda;
    uint32_t* dst = out + r * Kp;
    for (int64_t c = 0; c < Kd; c += 2 * kLanes) {  // 32 values = 16 words per step
      const __m512i v = to_bf16_pairs(src + c, Kd - c, src + c + kLanes, Kd - c - kLanes);
      const int64_t words = std::min<int64_t>(kLanes, (Kd - c + 1) / 2);
      _mm512_mask_storeu_epi32(dst + c / 2, first_lanes(words), v);
    }
  }
}

// After cvtne2ps of rows 2p (x0) and 2p + 1 (x1): bf16 lane i < 16 is x0[i], lane 16 + i is x1[i]; this
// permutation interleaves them into the words (x0[i], x1[i]).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i pair_interleave() {
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(kInterleave);
}

// The rounded halves of a cvtne2ps result as fp32: bf16 lanes [16 half, 16 half + 16) widened (exact).
template <int Half>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512 widen_half(__m512i bf) {
  const __m256i h = _mm512_extracti64x4_epi64(bf, Half);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}

// B [Kd, N] to words (p, n) = (B[2p, n], B[2p + 1, n]) in `hi`, rows of Np = ceil16(N) words (the odd row
// and the padding columns zero). With Split, the same words of the residual B - bf16(B) in `lo`, made from
// the rounded pairs in the same pass (exact in fp32; VCVTNE2PS2BF16 rounds as bf16_residual's bf16(x) does,
// NaNs quieted the same way, and a subnormal x or low term packs to zero either way), which is
// pack_bf16_split's definition.
template <bool Split>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_pairs(int64_t N, int64_t Kd, const float* B,
                                                                       int64_t ldb, int64_t Np, uint32_t* hi,
                                                                       uint32_t* lo) {
  const int64_t Kp = (Kd + 1) / 2;
  const __m512i idx = pair_interleave();
  for (int64_t p = 0; p < Kp; ++p) {
    const float* r0 = B + 2 * p * ldb;
    const float* r1 = r0 + ldb;
    const bool has_r1 = 2 * p + 1 < Kd;
    for (int64_t j = 0; j < Np; j += kLanes) {
      const int64_t n = N - j;
      const __mmask16 m = first_lanes(n);
      const __m512 x0 = _mm512_maskz_loadu_ps(m, r0 + j);
      const __m512 x1 = has_r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
      const __m512i pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
      _mm512_storeu_si512(hi + p * Np + j, _mm512_permutexvar_epi16(idx, pairs));
      if constexpr (Split) {
        const __m512 d0 = _mm512_sub_ps(x0, widen_half<0>(pairs)), d1 = _mm512_sub_ps(x1, widen_half<1>(pairs));
        const __m512i low = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(d1, d0));
        _mm512_storeu_si512(lo + p * Np + j, _mm512_permutexvar_epi16(idx, low));
      }
    }
  }
}

// pack_pairs without the low term. A transposed A operand (stored [Kd, M]) is packed the same way: word
// (p, r) is then op(A)'s pair (r, p).
void pack_b(int64_t N, int64_t Kd, const float* B, int64_t ldb, int64_t Np, uint32_t* out) {
  pack_pairs<false>(N, Kd, B, ldb, Np, out, nullptr);
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

// Rows [0, M) of the panels' products in blocks of kMR rows, then single rows. `lower`: A is lower
// triangular, so rows [i, i + mr) need only the pairs up to column i + mr - 1 and the rest (zero products)
// are skipped. rs: the rows' factors (RowScale; Scaled: not null).
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
  thread_local std::vector<uint32_t> abuf;
  const int64_t Kp = (Kd + 1) / 2, Mp = (M + kLanes - 1) / kLanes * kLanes;
  uint32_t* ap = words(&abuf, TransA ? Kp * Mp : M * Kp + kLanes);
  if (TransA) {
    pack_b(M, Kd, A, lda, Mp, ap);
  } else {
    pack_a(M, Kd, A, lda, ap);
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
  thread_local std::vector<uint32_t> bbuf;
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
  pack_pairs<true>(N, Kd, X, ldx, Np, reinterpret_cast<uint32_t*>(hi->reshape(Kd, N, Np, Kp * Np)),
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

// KernelSet::lower_times_bf16: each term's A to bf16 rows once, then every row block's terms chained in
// registers, up to the block's diagonal.
void lower_times(int64_t L, int64_t N, int nterms, const Bf16LowerTerm* terms, bool accumulate, float* C,
                 int64_t ldc) {
  if (L <= 0 || N <= 0 || nterms <= 0) return;
  thread_local std::vector<uint32_t> abuf;
  const int64_t Kp = (L + 1) / 2;
  uint32_t* w = words(&abuf, nterms * L * Kp);
  Panel t[kMaxLowerTerms];
  for (int k = 0; k < nterms; ++k) {
    pack_a(L, L, terms[k].A, terms[k].lda, w + k * L * Kp);
    t[k] = {w + k * L * Kp, Kp, 1, reinterpret_cast<const uint32_t*>(terms[k].B->data.data()), terms[k].B->ld};
  }
  multiply(L, N, nterms, t, Kp, true, accumulate, C, ldc);
}

// One pair word of a bf16 row: (x[2p], x[2p + 1]), the high half zero past Kd.
inline uint32_t pair_word(const uint16_t* x, int64_t p, int64_t Kd) {
  return x[2 * p] | (2 * p + 1 < Kd ? static_cast<uint32_t>(x[2 * p + 1]) << 16 : 0u);
}

// B = X^T for bf16 rows X [N, Kd]: word (p, n) = (X[n, 2p], X[n, 2p + 1]), a 32-bit transpose of the rows'
// pairs; padding columns [N, ld) zero, as pack_b leaves them. With even Kd and an even row stride on a
// 4-byte boundary the rows are words and each 16 columns of a word row are one gather; otherwise word by
// word with the odd tail zero-padded.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_rows_t(int64_t N, int64_t Kd, const uint16_t* X,
                                                                        int64_t ldx, Bf16Operand* out) {
  const int64_t Kp = (Kd + 1) / 2, Np = (N + kLanes - 1) / kLanes * kLanes;
  uint32_t* w = reinterpret_cast<uint32_t*>(out->reshape(Kd, N, Np, Kp * Np));
  const bool words_in_place = Kd % 2 == 0 && ldx % 2 == 0 && reinterpret_cast<uintptr_t>(X) % 4 == 0 &&
                              ldx / 2 * (Np - 1) <= INT32_MAX;
  if (!words_in_place) {
    for (int64_t p = 0; p < Kp; ++p) {
      for (int64_t n = 0; n < Np; ++n) w[p * Np + n] = n < N ? pair_word(X + n * ldx, p, Kd) : 0u;
    }
    return;
  }
  const int64_t lw = ldx / 2;  // row stride in words
  const __m512i lane_rows = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(static_cast<int>(lw)));
  for (int64_t j = 0; j < Np; j += kLanes) {
    const int64_t n = N - j;
    const __mmask16 m = first_lanes(n);
    const void* base = X + j * ldx;  // row j's first word
    for (int64_t p = 0; p < Kp; ++p) {
      const __m512i idx = _mm512_add_epi32(lane_rows, _mm512_set1_epi32(static_cast<int>(p)));
      _mm512_storeu_si512(w + p * Np + j, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 4));
    }
  }
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
    thread_local std::vector<uint32_t> abuf;
    uint32_t* w = words(&abuf, M * Kp);
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t p = 0; p < Kp; ++p) w[r * Kp + p] = pair_word(A + r * lda, p, Kd);
    }
    ap = w;
    ars = Kp;
  }
  multiply(M, N, Kp, Panel{ap, ars, 1, reinterpret_cast<const uint32_t*>(B.data.data()), B.ld}, accumulate, C, ldc, rs);
}

// op(A) = X^T for bf16 rows X [Kd, M]: word (p, r) = (X[2p, r], X[2p + 1, r]) in rows of Mp = ceil16(M) words,
// the panel pack_b makes of the widened rows (high half zero past Kd, padding columns zero): rows 2p and
// 2p + 1 zero-extended to words and interleaved, 16 columns at a time.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_rows_pairs(int64_t M, int64_t Kd,
                                                                                     const uint16_t* X, int64_t ldx,
                                                                                     int64_t Mp, uint32_t* out) {
  const int64_t Kp = (Kd + 1) / 2;
  for (int64_t p = 0; p < Kp; ++p) {
    const uint16_t* r0 = X + 2 * p * ldx;
    const uint16_t* r1 = r0 + ldx;
    const bool has_r1 = 2 * p + 1 < Kd;
    for (int64_t j = 0; j < Mp; j += kLanes) {
      const int64_t n = M - j;
      const __mmask16 m = first_lanes(n);
      const __m512i lo = _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r0 + j));
      const __m512i hi = has_r1 ? _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r1 + j))
                                : _mm512_setzero_si512();
      _mm512_storeu_si512(out + p * Mp + j, _mm512_or_si512(lo, _mm512_maskz_slli_epi32(m, hi, 16)));
    }
  }
}

// KernelSet::gemm_bf16_rows_tn: X^T's panel from the bf16 rows, then the transposed-A product gemm_tn_bf16
// runs (the same words, the same chains).
void gemm_rows_tn(int64_t M, int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, const Bf16Operand& B,
                  bool accumulate, float* C, int64_t ldc, RowScale rs) {
  if (M <= 0 || N <= 0) return;
  thread_local std::vector<uint32_t> abuf;
  const int64_t Kp = (Kd + 1) / 2, Mp = (M + kLanes - 1) / kLanes * kLanes;
  uint32_t* ap = words(&abuf, Kp * Mp);
  pack_rows_pairs(M, Kd, X, ldx, Mp, ap);
  multiply(M, N, Kp, Panel{ap, 1, Mp, reinterpret_cast<const uint32_t*>(B.data.data()), B.ld}, accumulate, C, ldc, rs);
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

}  // namespace

void append_avx512bf16_kernel_sets(std::vector<KernelSet>* out) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) return;
  for (const KernelSet& s : *out) {
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
    k.bf16_unit = "AVX512-BF16 dot products";
    k.bf16_peak = &bf16_peak;
    k.bf16_rate_over_fp32 = 2;
    out->insert(out->begin(), k);
    return;
  }
}

#else
void append_avx512bf16_kernel_sets(std::vector<KernelSet>*) {}
#endif
}  // namespace hanpu
