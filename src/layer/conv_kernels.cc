// Highway implementation of layer/conv_kernels.h, compiled once per target by foreach_target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layer/conv_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstring>

#include "hanpu/tensor.h"
#include "layer/conv_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hanpu::layer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x rounded to bf16 precision (nearest, ties to even; NaN kept), as bits in the upper half of each lane.
template <class D>
hn::Vec<D> RoundBf16(D d, hn::Vec<D> x) {
  const hn::RebindToUnsigned<D> du;
  auto u = hn::BitCast(du, x);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)), hn::Set(du, 0xffff0000u));
  return hn::IfThenElse(hn::Ne(x, x), x, hn::BitCast(d, u));
}

template <class D>
void Columns(D d, int64_t c, int64_t t, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
             const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo) {
  auto a = bias ? hn::LoadU(d, bias + c) : hn::Zero(d);
  for (int64_t j = 0; j < taps; ++j) a = hn::MulAdd(hn::LoadU(d, wts + j * ldw + c), hn::LoadU(d, in + (t + j) * w + c), a);
  if (round_bf16) a = RoundBf16(d, a);
  const auto one = hn::Set(d, 1.0f);
  auto y = hn::Div(a, hn::Add(one, hn::Exp(d, hn::Neg(a))));
  if (!out_bf16) {
    hn::StoreU(y, d, static_cast<float*>(out) + t * ldo + c);
    return;
  }
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  const auto bits = hn::ShiftRight<16>(hn::BitCast(di, RoundBf16(d, y)));  // sign bit: arithmetic shift
  const auto low = hn::And(bits, hn::Set(di, 0xffff));                      // the 16 bits, as a non-negative
  hn::StoreU(hn::DemoteTo(d16, low), d16, static_cast<uint16_t*>(out) + t * ldo + c);
}

void ConvSiluTile(int64_t n, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
                  const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t t = 0; t < n; ++t) {
    int64_t c = 0;
    for (; c + nl <= w; c += nl) Columns(d, c, t, w, taps, in, wts, ldw, bias, round_bf16, out_bf16, out, ldo);
    for (; c < w; ++c) Columns(d1, c, t, w, taps, in, wts, ldw, bias, round_bf16, out_bf16, out, ldo);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu::layer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hanpu::layer {

HWY_EXPORT(ConvSiluTile);

void conv_silu_tile(int64_t n, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
                    const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(ConvSiluTile)(n, w, taps, in, wts, ldw, bias, round_bf16, out_bf16, out, ldo);
}

void conv_silu_tile_reference(int64_t n, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
                              const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < w; ++c) {
      float a = bias ? bias[c] : 0.0f;
      for (int64_t j = 0; j < taps; ++j) a = std::fma(wts[j * ldw + c], in[(t + j) * w + c], a);
      if (round_bf16) a = bf16_bits_to_f32(f32_to_bf16_bits(a));
      const float y = a / (1.0f + std::exp(-a));
      if (out_bf16) {
        static_cast<uint16_t*>(out)[t * ldo + c] = f32_to_bf16_bits(y);
      } else {
        static_cast<float*>(out)[t * ldo + c] = y;
      }
    }
}

}  // namespace hanpu::layer
#endif  // HWY_ONCE
