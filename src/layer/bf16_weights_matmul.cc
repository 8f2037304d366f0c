// Highway implementation of layer/bf16_weights_matmul.h, compiled once per target by foreach_target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layer/bf16_weights_matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "hanpu/tensor.h"
#include "layer/bf16_weights_matmul.h"
// Per target, after foreach_target: LoadF32 (bf16 widened on load) joins hanpu::HWY_NAMESPACE.
#include "kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hanpu::layer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using hanpu::HWY_NAMESPACE::LoadF32;

// MB rows of x against NB rows of W: MB x NB dot products over Kd, each a vector of lane partial sums
// (a W vector widened once serves the MB rows; an x vector the NB rows), summed across lanes at the end; the
// last Kd mod lanes products added one by one. MB * NB + NB + 1 vectors live in registers (6 x 4: 29 of
// AVX-512's 32).
template <int MB, int NB, class D>
HWY_INLINE void Block(D d, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16, void* y, int64_t ldy) {
  using V = hn::Vec<D>;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  V acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = hn::Zero(d);
  int64_t k = 0;
  for (; k + nl <= Kd; k += nl) {
    V wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = LoadF32(d, w + j * Kd + k);
    for (int i = 0; i < MB; ++i) {
      const V xv = hn::LoadU(d, x + i * Kd + k);
      for (int j = 0; j < NB; ++j) acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float s = hn::GetLane(hn::SumOfLanes(d, acc[i][j]));
      for (int64_t t = k; t < Kd; ++t) s += x[i * Kd + t] * bf16_bits_to_f32(w[j * Kd + t]);
      if (y_bf16) {
        static_cast<uint16_t*>(y)[i * ldy + j] = f32_to_bf16_bits(s);
      } else {
        static_cast<float*>(y)[i * ldy + j] = s;
      }
    }
}

// All rows of x against NB rows of W: blocks of kRows rows, then the rest as one block of 1 to kRows - 1.
constexpr int kRows = 6;

template <int NB, int MB = kRows - 1, class D>
HWY_INLINE void LastRows(D d, int64_t rest, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16, void* y,
                         int64_t ldy) {
  if constexpr (MB > 0) {
    if (rest == MB) return Block<MB, NB>(d, Kd, x, w, y_bf16, y, ldy);
    LastRows<NB, MB - 1>(d, rest, Kd, x, w, y_bf16, y, ldy);
  }
}

template <int NB, class D>
HWY_INLINE void RowsAgainst(D d, int64_t M, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16, void* y,
                            int64_t ldy, std::size_t y_size) {
  const auto at = [&](int64_t m) { return static_cast<unsigned char*>(y) + m * ldy * y_size; };
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows) Block<kRows, NB>(d, Kd, x + m * Kd, w, y_bf16, at(m), ldy);
  LastRows<NB>(d, M - m, Kd, x + m * Kd, w, y_bf16, at(m), ldy);
}

void Bf16WeightsMatmul(int64_t M, int64_t n0, int64_t n1, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16,
                       void* y, int64_t ldy) {
  const hn::ScalableTag<float> d;
  const std::size_t y_size = y_bf16 ? 2 : 4;
  const auto col = [&](int64_t n) { return static_cast<unsigned char*>(y) + n * y_size; };
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) RowsAgainst<4>(d, M, Kd, x, w + n * Kd, y_bf16, col(n), ldy, y_size);
  for (; n < n1; ++n) RowsAgainst<1>(d, M, Kd, x, w + n * Kd, y_bf16, col(n), ldy, y_size);
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu::layer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hanpu::layer {

HWY_EXPORT(Bf16WeightsMatmul);

void bf16_weights_matmul(int64_t M, int64_t n0, int64_t n1, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16,
                         void* y, int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(Bf16WeightsMatmul)(M, n0, n1, Kd, x, w, y_bf16, y, ldy);
}

void bf16_weights_matmul_reference(int64_t M, int64_t n0, int64_t n1, int64_t Kd, const float* x, const uint16_t* w,
                                   bool y_bf16, void* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < Kd; ++k) s += x[m * Kd + k] * bf16_bits_to_f32(w[n * Kd + k]);
      if (y_bf16) {
        static_cast<uint16_t*>(y)[m * ldy + n] = f32_to_bf16_bits(s);
      } else {
        static_cast<float*>(y)[m * ldy + n] = s;
      }
    }
}

}  // namespace hanpu::layer
#endif  // HWY_ONCE
