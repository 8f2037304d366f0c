// Highway implementation of layer/vector_kernels.h, compiled once per target by foreach_target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layer/vector_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "hanpu/tensor.h"
#include "layer/vector_kernels.h"
// Per target, after foreach_target: ExpOf and the bf16 conversions join hanpu::HWY_NAMESPACE.
#include "kernels/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hanpu::layer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using hanpu::HWY_NAMESPACE::ExpOf;
using hanpu::HWY_NAMESPACE::LoadF32;
using hanpu::HWY_NAMESPACE::RoundBf16;
using hanpu::HWY_NAMESPACE::StoreF32;
using hanpu::HWY_NAMESPACE::WidenBf16;

template <class D>
void Columns(D d, int64_t c, int64_t t, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
             const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo) {
  auto a = bias ? hn::LoadU(d, bias + c) : hn::Zero(d);
  for (int64_t j = 0; j < taps; ++j) a = hn::MulAdd(hn::LoadU(d, wts + j * ldw + c), hn::LoadU(d, in + (t + j) * w + c), a);
  if (round_bf16) a = RoundBf16(d, a);
  const auto y = hn::Div(a, hn::Add(hn::Set(d, 1.0f), ExpOf(d, hn::Neg(a))));
  if (out_bf16) {
    StoreF32(d, y, static_cast<uint16_t*>(out) + t * ldo + c);
  } else {
    StoreF32(d, y, static_cast<float*>(out) + t * ldo + c);
  }
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

// sum_i x_i^2 over n values (fp32, or bf16 widened) in double: products and sums of double lanes.
template <typename T>
double SumSquares(int64_t n, const T* x) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dh;  // as many float lanes as dd has
  const int64_t nd = static_cast<int64_t>(hn::Lanes(dd));
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * nd <= n; i += 2 * nd) {
    const auto u = hn::PromoteTo(dd, LoadF32(dh, x + i)), v = hn::PromoteTo(dd, LoadF32(dh, x + i + nd));
    a0 = hn::MulAdd(u, u, a0);
    a1 = hn::MulAdd(v, v, a1);
  }
  double s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(a0, a1)));
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) {
    const double xi = hn::GetLane(LoadF32(d1, x + i));
    s += xi * xi;
  }
  return s;
}

// One vector of a group's gated norm (vector_kernels.h): z's exp and every product in fp32, rounded (bf16
// rows) where the module's bf16 tensors round.
template <class D, typename T>
HWY_INLINE void GatedNormColumns(D d, bool gdn, hn::Vec<D> r, const float* w, T* o, const T* z) {
  constexpr bool kBf16 = std::is_same_v<T, uint16_t>;
  const auto rnd = [d](hn::Vec<D> x) { return kBf16 ? RoundBf16(d, x) : x; };
  const auto one = hn::Set(d, 1.0f);
  const auto x = LoadF32(d, o), g = LoadF32(d, z), wv = hn::LoadU(d, w);
  const auto den = hn::Add(one, ExpOf(d, hn::Neg(g)));  // silu(g) = g / den, sigmoid(g) = 1 / den
  const auto y = gdn ? hn::Mul(rnd(hn::Mul(wv, rnd(hn::Mul(x, r)))), hn::Div(g, den))
                     : hn::Mul(hn::Mul(wv, hn::Mul(x, r)), hn::Div(one, den));
  StoreF32(d, y, o);
}

template <typename T>
void GatedNormOf(int64_t groups, int64_t V, bool gdn, float eps, const float* w, T* o, const T* z) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const int64_t nl = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t k = 0; k < groups; ++k) {
    T* og = o + k * V;
    const T* zg = z + k * V;
    const float r = 1.0f / std::sqrt(static_cast<float>(SumSquares(V, og) / static_cast<double>(V)) + eps);
    int64_t i = 0;
    for (; i + nl <= V; i += nl) GatedNormColumns(d, gdn, hn::Set(d, r), w + i, og + i, zg + i);
    for (; i < V; ++i) GatedNormColumns(d1, gdn, hn::Set(d1, r), w + i, og + i, zg + i);
  }
}

inline float ToF32(float x) { return x; }
inline float ToF32(uint16_t x) { return bf16_bits_to_f32(x); }

// Four taps in a dense block (Qwen3.5's, Qwen3-Next's and Kimi Linear's conv, windows back to back): whole
// vectors of windows deinterleaved by LoadInterleaved4 (tap 0, the oldest, dropped), the last partial vector
// lane by lane; other tap counts and strides lane by lane throughout. Widening is exact, so every form gives
// the same values.
template <typename T>
void WindowRowsOf(int64_t w, int64_t taps, const T* x, int64_t ldc, int64_t ldt, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  if (taps == 4 && ldc == 4 && ldt == 1) {
    const hn::Rebind<T, decltype(d)> dt;  // float lanes, or bf16 bits as many
    const auto f32 = [&](hn::Vec<decltype(dt)> v) {
      if constexpr (std::is_same_v<T, uint16_t>) {
        return WidenBf16(d, v);
      } else {
        return v;
      }
    };
    for (; c + N <= w; c += N) {
      hn::Vec<decltype(dt)> t0, t1, t2, t3;
      hn::LoadInterleaved4(dt, x + 4 * c, t0, t1, t2, t3);
      hn::StoreU(f32(t1), d, out + c);
      hn::StoreU(f32(t2), d, out + w + c);
      hn::StoreU(f32(t3), d, out + 2 * w + c);
    }
  }
  for (; c < w; ++c)
    for (int64_t j = 0; j + 1 < taps; ++j) out[j * w + c] = ToF32(x[c * ldc + (j + 1) * ldt]);
}

void ConvWindowRows(int64_t w, int64_t taps, const void* x, int64_t ldc, int64_t ldt, bool bf16, float* out) {
  if (bf16) {
    WindowRowsOf(w, taps, static_cast<const uint16_t*>(x), ldc, ldt, out);
  } else {
    WindowRowsOf(w, taps, static_cast<const float*>(x), ldc, ldt, out);
  }
}

void GatedRmsNorm(int64_t groups, int64_t V, bool gdn, float eps, const float* w, bool bf16, void* o,
                  const void* z) {
  if (bf16) {
    GatedNormOf(groups, V, gdn, eps, w, static_cast<uint16_t*>(o), static_cast<const uint16_t*>(z));
  } else {
    GatedNormOf(groups, V, gdn, eps, w, static_cast<float*>(o), static_cast<const float*>(z));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu::layer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hanpu::layer {

HWY_EXPORT(ConvSiluTile);
HWY_EXPORT(ConvWindowRows);
HWY_EXPORT(GatedRmsNorm);

void conv_window_rows(int64_t w, int64_t taps, const void* x, int64_t ldc, int64_t ldt, bool bf16, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvWindowRows)(w, taps, x, ldc, ldt, bf16, out);
}

void conv_window_rows_reference(int64_t w, int64_t taps, const void* x, int64_t ldc, int64_t ldt, bool bf16,
                                float* out) {
  for (int64_t j = 0; j + 1 < taps; ++j)
    for (int64_t c = 0; c < w; ++c) {
      const int64_t i = c * ldc + (j + 1) * ldt;
      out[j * w + c] = bf16 ? bf16_bits_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    }
}

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

void gated_rms_norm(int64_t groups, int64_t V, bool gdn, float eps, const float* w, bool bf16, void* o, const void* z) {
  HWY_DYNAMIC_DISPATCH(GatedRmsNorm)(groups, V, gdn, eps, w, bf16, o, z);
}

namespace {
template <typename T>
void gated_norm_reference_of(int64_t groups, int64_t V, bool gdn, float eps, const float* w, T* o, const T* z) {
  constexpr bool kBf16 = std::is_same_v<T, uint16_t>;
  const auto ld = [](const T* p, int64_t i) -> float {
    if constexpr (kBf16) return bf16_bits_to_f32(p[i]);
    return p[i];
  };
  const auto rnd = [](float x) { return kBf16 ? bf16_bits_to_f32(f32_to_bf16_bits(x)) : x; };
  for (int64_t k = 0; k < groups; ++k) {
    T* og = o + k * V;
    const T* zg = z + k * V;
    double ss = 0;
    for (int64_t i = 0; i < V; ++i) ss += static_cast<double>(ld(og, i)) * ld(og, i);
    const float r = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(V)) + eps);
    for (int64_t i = 0; i < V; ++i) {
      const float g = ld(zg, i), den = 1.0f + std::exp(-g);
      const float y = gdn ? rnd(w[i] * rnd(ld(og, i) * r)) * (g / den) : w[i] * (ld(og, i) * r) * (1.0f / den);
      if constexpr (kBf16) {
        og[i] = f32_to_bf16_bits(y);
      } else {
        og[i] = y;
      }
    }
  }
}
}  // namespace

void gated_rms_norm_reference(int64_t groups, int64_t V, bool gdn, float eps, const float* w, bool bf16, void* o,
                              const void* z) {
  if (bf16) {
    gated_norm_reference_of(groups, V, gdn, eps, w, static_cast<uint16_t*>(o), static_cast<const uint16_t*>(z));
  } else {
    gated_norm_reference_of(groups, V, gdn, eps, w, static_cast<float*>(o), static_cast<const float*>(z));
  }
}

}  // namespace hanpu::layer
#endif  // HWY_ONCE
