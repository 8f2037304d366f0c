// Lane-wise maths shared by the Highway translation units (kernels/simd.cc, layer/vector_kernels.cc): e^x,
// and the bf16 conversions with f32_to_bf16_bits' rounding (hanpu/tensor.h). A Highway "-inl" header: each
// file compiled once per target by foreach_target includes it once per target, so its guard toggles with
// HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(HANPU_KERNELS_VEC_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANPU_KERNELS_VEC_MATH_INL_H_
#undef HANPU_KERNELS_VEC_MATH_INL_H_
#else
#define HANPU_KERNELS_VEC_MATH_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace hanpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// bf16 bit patterns in a vector of u16 lanes (as many as d's) widened to fp32 (exact: the bits move up 16
// places).
template <class D>
HWY_INLINE hn::Vec<D> WidenBf16(D d, hn::Vec<hn::Rebind<uint16_t, D>> bits) {
  const hn::RebindToUnsigned<D> du32;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
}

// A vector of fp32 from fp32 values, or from bf16 bit patterns widened.
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const float* x) {
  return hn::LoadU(d, x);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const uint16_t* x) {
  const hn::Rebind<uint16_t, D> du16;
  return WidenBf16(d, hn::LoadU(du16, x));
}

// The bf16 rounding of fp32 bit patterns u (nearest, ties to even) in the upper half of
// u + 0x7FFF + (bit 16 of u); NaNs are the callers' to treat.
template <class DU, class VU>
HWY_INLINE VU RoundedBf16Bits(DU du, VU u) {
  return hn::Add(hn::Add(u, hn::Set(du, 0x7FFFu)), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
}

// x rounded to bf16 and kept in fp32 (low 16 bits zero), lane-wise as round_bf16: RoundedBf16Bits's upper
// half; a NaN's upper half with the quiet bit set (so a NaN stays a NaN whatever its payload).
template <class DF>
HWY_INLINE hn::Vec<DF> RoundBf16(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du32;
  const auto high = hn::Set(du32, 0xFFFF0000u);
  const auto u = hn::BitCast(du32, x);
  const auto rounded = hn::And(RoundedBf16Bits(du32, u), high);
  const auto nan = hn::Or(hn::And(u, high), hn::Set(du32, 0x00400000u));
  return hn::BitCast(df, hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(x)), nan, rounded));
}

// fp32 -> bf16 of a float vector x, stored as its lanes' bit patterns at dst: nearest with ties to even, NaN
// kept quiet (f32_to_bf16_bits, lane-wise): RoundedBf16Bits's upper half; a NaN's upper half with the quiet bit
// set.
template <class DF>
HWY_INLINE void StoreBf16Bits(DF, hn::Vec<DF> x, uint16_t* dst) {
  const hn::RebindToSigned<DF> di32;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, x);
  const auto rounded = hn::ShiftRight<16>(RoundedBf16Bits(du32, u));
  const auto nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du32, 0x40u));
  const auto bits = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(x)), nan, rounded);
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, bits)), du16, dst);  // bits <= 0xFFFF: no saturation
}

// Stores x as fp32 values, or as bf16 bit patterns (StoreBf16Bits).
template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> x, float* dst) {
  hn::StoreU(x, df, dst);
}
template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> x, uint16_t* dst) {
  StoreBf16Bits(df, x, dst);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// a 2^floor(b), one rounding (VSCALEFPS), on each of Highway's x86 float vector sizes.
template <size_t N>
HWY_INLINE hn::Vec128<float, N> ScaleByPow2(hn::Vec128<float, N> a, hn::Vec128<float, N> b) {
  return hn::Vec128<float, N>{_mm_scalef_ps(a.raw, b.raw)};
}
HWY_INLINE hn::Vec256<float> ScaleByPow2(hn::Vec256<float> a, hn::Vec256<float> b) {
  return hn::Vec256<float>{_mm256_scalef_ps(a.raw, b.raw)};
}
HWY_INLINE hn::Vec512<float> ScaleByPow2(hn::Vec512<float> a, hn::Vec512<float> b) {
  return hn::Vec512<float>{_mm512_scalef_ps(a.raw, b.raw)};
}
#endif

// e^x, lane-wise: every exp of the library's Highway code (exp_f32, exp_diff, the decay masks, KDA's gate
// factors, the layer's SiLU) goes through it. On AVX-512 the arithmetic of Highway's Exp, term for term (so
// the same bits wherever Highway's own is valid: every float in [-128, 96], infinities and NaNs compared,
// with and without flushing subnormals): q = trunc(x log2(e) + copysign(1/2, x)); r = x + q c0 + q c1 with
// c0 + c1 ~= -ln 2 (a two-part constant, so that q c0 is exact); e^r - 1 ~= r + r^2 P(r), P of degree 5 on
// Estrin's scheme; then (e^r - 1 + 1) 2^q, and 0 below x = -104 (and for NaN). The 2^q is one VSCALEFPS where
// Highway builds two powers of two from an int32 q's halves and multiplies by both (exact until the result's
// one rounding, which VSCALEFPS makes alike), and q stays a float (a round toward zero, no conversion to int32
// and back): 8 of its 26 instructions fewer; 8192 exps (a KDA chunk's gates) in 2.1 instead of 2.8 us, a KDA
// step's load 11.6 -> 9.4 us (Ice Lake Xeon, in cache, bests). Elsewhere Highway's Exp itself, on x up to 88.8
// and infinity beyond: its int32 q's halves overflow their exponent fields past x ~ 177 (exp(1000) = 8e-29),
// where the float q above just scales to infinity.
template <class D>
HWY_INLINE hn::Vec<D> ExpOf(D d, hn::Vec<D> x) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const auto q = hn::Trunc(hn::MulAdd(x, hn::Set(d, 1.442695040888963407359924681f),
                                      hn::Or(hn::Set(d, 0.5f), hn::And(x, hn::Set(d, -0.0f)))));
  auto r = hn::MulAdd(q, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(q, hn::Set(d, -1.428606765330187045e-6f), r);
  const auto r2 = hn::Mul(r, r);
  const auto r4 = hn::Mul(r2, r2);
  const auto lo = hn::MulAdd(hn::Set(d, 0.166666671633720397949219f), r, hn::Set(d, 0.5f));
  const auto mid = hn::MulAdd(hn::Set(d, 0.00833336077630519866943359f), r, hn::Set(d, 0.0416664853692054748535156f));
  const auto hi = hn::MulAdd(hn::Set(d, 0.000198527617612853646278381f), r, hn::Set(d, 0.00139304355252534151077271f));
  const auto poly = hn::MulAdd(r4, hi, hn::MulAdd(r2, mid, lo));
  const auto y = ScaleByPow2(hn::Add(hn::MulAdd(poly, r2, r), hn::Set(d, 1.0f)), q);
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, -104.0f)), y);
#else
  const auto big = hn::Set(d, 88.8f);  // e^88.8 > FLT_MAX
  return hn::IfThenElse(hn::Gt(x, big), hn::Set(d, HUGE_VALF), hn::Exp(d, x));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace hanpu
HWY_AFTER_NAMESPACE();

#endif  // HANPU_KERNELS_VEC_MATH_INL_H_
