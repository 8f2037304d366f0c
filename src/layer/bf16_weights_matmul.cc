// Highway implementation of layer/bf16_weights_matmul.h, compiled once per target by foreach_target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layer/bf16_weights_matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hanpu/tensor.h"
#include "layer/bf16_weights_matmul.h"

HWY_BEFORE_NAMESPACE();
namespace hanpu::layer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A pass: MB rows of x against kVecs vectors of columns (4 x 16 = 64 columns on AVX-512, one packed block).
// Per pair p: each W vector (two K steps of its columns) split into its two fp32 vectors, each met by the MB
// rows' broadcast x values. Registers: MB * kVecs accumulators + 2 MB broadcasts + 3; x86 targets below
// AVX-512 have 16 vector registers, the rest 32.
constexpr int kVecs = 4;
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRows = 2;
#else
constexpr int kRows = 4;
#endif

// The pass's sums into `out` ([MB][kVecs * lanes] fp32).
template <int MB, class D>
HWY_INLINE void Pass(D d, int64_t Kp, const float* x, const uint32_t* w, float* out) {
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const size_t nl = hn::Lanes(d);
  const auto high = hn::Set(du, 0xFFFF0000u);
  V acc[MB][kVecs];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < kVecs; ++j) acc[i][j] = hn::Zero(d);
  for (int64_t p = 0; p < Kp; ++p, w += kPairCols) {
    V lo[MB], hi[MB];
    for (int i = 0; i < MB; ++i) {
      lo[i] = hn::Set(d, x[i * 2 * Kp + 2 * p]);
      hi[i] = hn::Set(d, x[i * 2 * Kp + 2 * p + 1]);
    }
    for (int j = 0; j < kVecs; ++j) {
      const auto pair = hn::Load(du, w + j * nl);
      const V even = hn::BitCast(d, hn::ShiftLeft<16>(pair)), odd = hn::BitCast(d, hn::And(pair, high));
      for (int i = 0; i < MB; ++i) acc[i][j] = hn::MulAdd(hi[i], odd, hn::MulAdd(lo[i], even, acc[i][j]));
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < kVecs; ++j) hn::StoreU(acc[i][j], d, out + (i * kVecs + j) * nl);
}

// MB rows against the first `cols` columns of one packed block, in passes of kVecs vectors (one on AVX-512,
// two on AVX2, four on NEON), each pass's sums written to y.
template <int MB, class D>
HWY_INLINE void RowsOfBlock(D d, int64_t Kp, const float* x, const uint32_t* block, int64_t cols, bool y_bf16,
                            unsigned char* y, int64_t ldy) {
  const int64_t width = kVecs * static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float out[MB * kPairCols];  // a pass is at most a block wide
  for (int64_t c = 0; c < cols; c += width) {
    Pass<MB>(d, Kp, x, block + c, out);
    const int64_t n = std::min(width, cols - c);
    for (int i = 0; i < MB; ++i) {
      if (y_bf16) {
        uint16_t* row = reinterpret_cast<uint16_t*>(y) + i * ldy + c;
        for (int64_t t = 0; t < n; ++t) row[t] = f32_to_bf16_bits(out[i * width + t]);
      } else {
        std::memcpy(reinterpret_cast<float*>(y) + i * ldy + c, out + i * width, static_cast<size_t>(n) * sizeof(float));
      }
    }
  }
}

// The last M mod kRows rows, as one pass of 1 .. kRows - 1 rows.
template <int MB = kRows - 1, class D>
HWY_INLINE void LastRows(D d, int64_t rest, int64_t Kp, const float* x, const uint32_t* block, int64_t cols,
                         bool y_bf16, unsigned char* y, int64_t ldy) {
  if constexpr (MB > 0) {
    if (rest == MB) return RowsOfBlock<MB>(d, Kp, x, block, cols, y_bf16, y, ldy);
    LastRows<MB - 1>(d, rest, Kp, x, block, cols, y_bf16, y, ldy);
  }
}

void Bf16PairsMatmul(int64_t M, int64_t n0, int64_t n1, int64_t Kp, const float* x, const uint32_t* packed,
                     bool y_bf16, void* y, int64_t ldy) {
  const hn::CappedTag<float, 16> d;  // a pass spans at most a packed block (4 x 16 = kPairCols)
  const size_t y_size = y_bf16 ? 2 : 4;
  for (int64_t n = n0; n < n1; n += kPairCols) {
    const uint32_t* block = packed + n / kPairCols * Kp * kPairCols;
    const int64_t cols = std::min(kPairCols, n1 - n);
    unsigned char* yn = static_cast<unsigned char*>(y) + n * y_size;
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows)
      RowsOfBlock<kRows>(d, Kp, x + m * 2 * Kp, block, cols, y_bf16, yn + m * ldy * y_size, ldy);
    LastRows(d, M - m, Kp, x + m * 2 * Kp, block, cols, y_bf16, yn + m * ldy * y_size, ldy);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu::layer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hanpu::layer {

HWY_EXPORT(Bf16PairsMatmul);

void pack_bf16_pairs(int64_t N, int64_t Kd, const uint16_t* w, uint32_t* packed) {
  const int64_t Kp = bf16_pairs_depth(Kd), blocks = (N + kPairCols - 1) / kPairCols;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t p = 0; p < Kp; ++p)
      for (int64_t c = 0; c < kPairCols; ++c) {
        const int64_t n = b * kPairCols + c, k = 2 * p;
        const uint32_t lo = n < N ? w[n * Kd + k] : 0, hi = n < N && k + 1 < Kd ? w[n * Kd + k + 1] : 0;
        packed[(b * Kp + p) * kPairCols + c] = lo | hi << 16;
      }
}

void bf16_pairs_matmul(int64_t M, int64_t n0, int64_t n1, int64_t Kp, const float* x, const uint32_t* packed,
                       bool y_bf16, void* y, int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(Bf16PairsMatmul)(M, n0, n1, Kp, x, packed, y_bf16, y, ldy);
}

void bf16_pairs_matmul_reference(int64_t M, int64_t n0, int64_t n1, int64_t Kp, const float* x, const uint32_t* packed,
                                 bool y_bf16, void* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      const uint32_t* col = packed + (n / kPairCols * Kp) * kPairCols + n % kPairCols;
      float s = 0.0f;
      for (int64_t p = 0; p < Kp; ++p) {
        const uint32_t pair = col[p * kPairCols];
        s = std::fma(x[m * 2 * Kp + 2 * p], bf16_bits_to_f32(static_cast<uint16_t>(pair)), s);
        s = std::fma(x[m * 2 * Kp + 2 * p + 1], bf16_bits_to_f32(static_cast<uint16_t>(pair >> 16)), s);
      }
      if (y_bf16) {
        static_cast<uint16_t*>(y)[m * ldy + n] = f32_to_bf16_bits(s);
      } else {
        static_cast<float*>(y)[m * ldy + n] = s;
      }
    }
}

}  // namespace hanpu::layer
#endif  // HWY_ONCE
