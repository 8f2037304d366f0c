// bf16 operands as 32-bit pair words, the layout of the bf16 dot-product and tile instructions: the word of a
// row-major bf16 matrix X at (r, p) holds (X[r, 2p], X[r, 2p + 1]) (low half first). Both x86 bf16 sets build
// their operands from these packings (kernels/gemm_avx512bf16.cpp: VDPBF16PS broadcasts A's words and reads
// B's word rows; kernels/gemm_amx.cpp: TDPBF16PS reads A's word rows as tile rows and B's word rows as a
// tile's rows). With Kp = ceil(Kd / 2) pairs, an odd Kd's last word has a zero high half.
// Defined in kernels/bf16_pairs.cpp for AVX512-BF16; callable only where the CPU has it.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

namespace hanpu::bf16_pairs {

inline constexpr int64_t kLanes = 16;  // 32-bit lanes of a 512-bit register

// The first min(n, 16) of 16 lanes (n >= 1).
inline __mmask16 first_lanes(int64_t n) { return n >= kLanes ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1); }

inline int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// After VCVTNE2PS2BF16 of rows 2p (x0) and 2p + 1 (x1): bf16 lane i < 16 is x0[i], lane 16 + i is x1[i]; this
// permutation interleaves them into the words (x0[i], x1[i]).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i pair_interleave() {
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(kInterleave);
}

// The rounded halves of a VCVTNE2PS2BF16 result as fp32: bf16 lanes [16 half, 16 half + 16) widened (exact).
template <int Half>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512 widen_half(__m512i bf) {
  const __m256i h = _mm512_extracti64x4_epi64(bf, Half);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}

// The 16 pair words of two rows' 16 values x0 (row 2p) and x1 (row 2p + 1): bf16(x0[i]), bf16(x1[i]) rounded
// to nearest even (NaNs quiet); with lo, the words of the residuals x - bf16(x) too (exact in fp32; a
// subnormal packs to zero either way). `idx` is pair_interleave(). Every packing of pairs goes through it.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i pair_words(__m512 x0, __m512 x1, __m512i idx,
                                                                                __m512i* lo) {
  const __m512i pairs = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));  // lanes 0-15 x0, 16-31 x1
  if (lo) {
    const __m512 d0 = _mm512_sub_ps(x0, widen_half<0>(pairs)), d1 = _mm512_sub_ps(x1, widen_half<1>(pairs));
    *lo = _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(d1, d0)));
  }
  return _mm512_permutexvar_epi16(idx, pairs);
}

// One pair word of a bf16 row: (x[2p], x[2p + 1]), the high half zero past Kd.
inline uint32_t pair_word(const uint16_t* x, int64_t p, int64_t Kd) {
  return x[2 * p] | (2 * p + 1 < Kd ? static_cast<uint32_t>(x[2 * p + 1]) << 16 : 0u);
}

// dst[c * ldd + r] = src[r * lds + c] for a 16 x 16 block of 32-bit words.
void transpose16(const uint32_t* src, int64_t lds, uint32_t* dst, int64_t ldd);

// A [M, Kd] rounded to bf16 rows (nearest, ties to even): row r's Kp words at out + r * ldo.
void pack_rows(int64_t M, int64_t Kd, const float* A, int64_t lda, uint32_t* out, int64_t ldo);

// B [Kd, N] rounded to words (p, n) = (B[2p, n], B[2p + 1, n]) in Kp rows of Np >= N words (row p at
// hi + p * Np; Np a multiple of 16; columns [N, Np) zero). With lo not null, the same words of the residual
// B - bf16(B) in lo, made from the rounded pairs in the same pass (KernelSet::pack_bf16_split's definition).
// A transposed A operand (stored [Kd, M]) packs the same way: word (p, r) is op(A)'s pair (r, p).
void pack_pairs(int64_t N, int64_t Kd, const float* B, int64_t ldb, int64_t Np, uint32_t* hi, uint32_t* lo);

// B = X^T for bf16 rows X [N, Kd] (row stride ldx): word (p, n) = (X[n, 2p], X[n, 2p + 1]) in Kp rows of
// Np >= N words (a multiple of 16; columns [N, Np) zero): pack_pairs of the widened transpose, bit for bit.
void pack_rows_t(int64_t N, int64_t Kd, const uint16_t* X, int64_t ldx, int64_t Np, uint32_t* out);

// op(A) = X^T's pair panel for bf16 rows X [Kd, M]: word (p, r) = (X[2p, r], X[2p + 1, r]) in Kp rows of
// Mp >= M words (a multiple of 16; columns [M, Mp) zero): pack_pairs of the widened rows, bit for bit.
void pack_rows_pairs(int64_t M, int64_t Kd, const uint16_t* X, int64_t ldx, int64_t Mp, uint32_t* out);

}  // namespace hanpu::bf16_pairs
#endif
