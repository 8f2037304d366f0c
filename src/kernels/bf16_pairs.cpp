// The pair-word packings of kernels/bf16_pairs.h on AVX512-BF16 (VCVTNE2PS2BF16 rounds to nearest, ties to
// even, NaNs quiet, as f32_to_bf16_bits does). This file's functions carry AVX512-BF16 target attributes and
// run only behind the kernel sets' run-time checks.
#include "kernels/bf16_pairs.h"

#if defined(__x86_64__) || defined(__i386__)
#include <algorithm>
#include <climits>
#include <cstdint>

namespace hanpu::bf16_pairs {
namespace {

// Rounds 16 floats (the low `n` of them, the rest zero) and the next 16 (`n2`) to 32 bf16 in order.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512i to_bf16_pairs(const float* lo, int64_t n,
                                                                                    const float* hi, int64_t n2) {
  const __m512 x0 = _mm512_maskz_loadu_ps(first_lanes(n), lo);
  const __m512 x1 = n2 <= 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(first_lanes(n2), hi);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));  // lanes 0-15 from x0, 16-31 from x1
}

// pack_pairs; the low term with Split (exact in fp32; VCVTNE2PS2BF16 rounds as bf16_residual's bf16(x) does,
// NaNs quieted the same way, and a subnormal x or low term packs to zero either way).
template <bool Split>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pairs(int64_t N, int64_t Kd, const float* B, int64_t ldb,
                                                                  int64_t Np, uint32_t* hi, uint32_t* lo) {
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
      __m512i low;
      _mm512_storeu_si512(hi + p * Np + j, pair_words(x0, x1, idx, Split ? &low : nullptr));
      if constexpr (Split) _mm512_storeu_si512(lo + p * Np + j, low);
    }
  }
}

}  // namespace

// dst[c, r] = src[r, c] for a 16 x 16 block of words (row strides lds, ldd): 32-bit pairs, 64-bit pairs,
// then 128-bit lanes twice.
__attribute__((target("avx512f"))) void transpose16(const uint32_t* src, int64_t lds, uint32_t* dst, int64_t ldd) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * lds);
  for (int i = 0; i < 16; i += 2) {  // t[i] lane L: r_i[4L], r_i+1[4L], r_i[4L+1], r_i+1[4L+1]; t[i+1]: +2
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + c] lane L: column 4L + c of rows g..g+3
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // output row 4L + c: lane L of r[c], r[4 + c], r[8 + c], r[12 + c]
    const __m512i a0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), a1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xDD);
    const __m512i b0 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i b1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xDD);
    _mm512_storeu_si512(dst + (0 + c) * ldd, _mm512_shuffle_i32x4(a0, b0, 0x88));
    _mm512_storeu_si512(dst + (4 + c) * ldd, _mm512_shuffle_i32x4(a1, b1, 0x88));
    _mm512_storeu_si512(dst + (8 + c) * ldd, _mm512_shuffle_i32x4(a0, b0, 0xDD));
    _mm512_storeu_si512(dst + (12 + c) * ldd, _mm512_shuffle_i32x4(a1, b1, 0xDD));
  }
}

// A [M, Kd] to bf16 rows of Kp words at out + r * ldo.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_rows(int64_t M, int64_t Kd, const float* A,
                                                                      int64_t lda, uint32_t* out, int64_t ldo) {
  for (int64_t r = 0; r < M; ++r) {
    const float* src = A + r * lda;
    uint32_t* dst = out + r * ldo;
    for (int64_t c = 0; c < Kd; c += 2 * kLanes) {  // 32 values = 16 words per step
      const __m512i v = to_bf16_pairs(src + c, Kd - c, src + c + kLanes, Kd - c - kLanes);
      const int64_t words = std::min<int64_t>(kLanes, (Kd - c + 1) / 2);
      _mm512_mask_storeu_epi32(dst + c / 2, first_lanes(words), v);
    }
  }
}

void pack_pairs(int64_t N, int64_t Kd, const float* B, int64_t ldb, int64_t Np, uint32_t* hi, uint32_t* lo) {
  if (lo) {
    pairs<true>(N, Kd, B, ldb, Np, hi, lo);
  } else {
    pairs<false>(N, Kd, B, ldb, Np, hi, nullptr);
  }
}

// A 32-bit transpose of the rows' pairs. With even Kd and an even row stride on a
// 4-byte boundary the rows are words: whole 16 x 16 blocks are transposed in registers and the rest
// gathered 16 columns of a word row at a time; otherwise word by word with the odd tail zero-padded.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_rows_t(int64_t N, int64_t Kd, const uint16_t* X,
                                                                        int64_t ldx, int64_t Np, uint32_t* w) {
  const int64_t Kp = (Kd + 1) / 2;
  const bool words_in_place =
      Kd % 2 == 0 && ldx % 2 == 0 && reinterpret_cast<uintptr_t>(X) % 4 == 0 && ldx / 2 * (Np - 1) <= INT32_MAX;
  if (!words_in_place) {
    for (int64_t p = 0; p < Kp; ++p) {
      for (int64_t n = 0; n < Np; ++n) w[p * Np + n] = n < N ? pair_word(X + n * ldx, p, Kd) : 0u;
    }
    return;
  }
  const int64_t lw = ldx / 2;  // row stride in words
  const __m512i lane_rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32(static_cast<int>(lw)));
  const uint32_t* xw = reinterpret_cast<const uint32_t*>(X);
  for (int64_t j = 0; j < Np; j += kLanes) {
    const int64_t n = N - j;
    const __mmask16 m = first_lanes(n);
    const void* base = X + j * ldx;  // row j's first word
    int64_t p = 0;
    // Whole 16 x 16 blocks of words by register transposition (a 64-row chunk's K^T: 0.52 us by gathers),
    // the rest by gathers.
    if (n >= kLanes) {
      for (; p + kLanes <= Kp; p += kLanes) transpose16(xw + j * lw + p, lw, w + p * Np + j, Np);
    }
    for (; p < Kp; ++p) {
      const __m512i idx = _mm512_add_epi32(lane_rows, _mm512_set1_epi32(static_cast<int>(p)));
      _mm512_storeu_si512(w + p * Np + j, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 4));
    }
  }
}

// Rows 2p and 2p + 1 zero-extended to words and interleaved, 16 columns at a time.
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
      const __m512i hi =
          has_r1 ? _mm512_maskz_cvtepu16_epi32(m, _mm256_maskz_loadu_epi16(m, r1 + j)) : _mm512_setzero_si512();
      _mm512_storeu_si512(out + p * Mp + j, _mm512_or_si512(lo, _mm512_maskz_slli_epi32(m, hi, 16)));
    }
  }
}

}  // namespace hanpu::bf16_pairs
#endif
