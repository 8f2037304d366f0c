#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "hanpu/tensor.h"

namespace hanpu {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Reference bf16 rounding: pick the nearer of the two bf16 neighbours in double, ties to even.
uint16_t bf16_reference(float x) {
  const uint32_t u = bits(x);
  const uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
  const double dl = std::fabs(static_cast<double>(bf16_bits_to_f32(lo)) - x);
  const double dh = std::fabs(static_cast<double>(bf16_bits_to_f32(hi)) - x);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

#if defined(__FLT16_MAX__) && defined(__x86_64__)  // GCC 12 has _Float16 in C++ on x86 only
TEST(DType, F16DecodeMatchesCompilerForAllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    const uint16_t hb = static_cast<uint16_t>(h);
    std::memcpy(&ref, &hb, 2);
    const float want = static_cast<float>(ref), got = f16_bits_to_f32(hb);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(bits(want), bits(got)) << "bits " << h;
    }
  }
}

TEST(DType, F16EncodeMatchesCompilerRounding) {
  std::mt19937 rng(7);
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 2.9802322e-8f,
                           5.96e-8f, 6.1035e-5f, 6.1e-5f, -3.0e-7f, 1e30f, -1e30f,
                           std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  std::uniform_real_distribution<float> small(-1e-4f, 1e-4f);  // dense coverage of the subnormal range
  for (int i = 0; i < 100000; ++i) xs.push_back(small(rng));
  for (float x : xs) {
    const _Float16 ref = static_cast<_Float16>(x);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    EXPECT_EQ(rb, f32_to_f16_bits(x)) << "x = " << x;
  }
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::nanf("")))));
}
#endif

TEST(DType, Bf16RoundsToNearestEven) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f) || std::isinf(f) || std::fabs(f) > 3e38f) continue;
    EXPECT_EQ(bf16_reference(f), f32_to_bf16_bits(f)) << f;
  }
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(bf16_bits_to_f32(f32_to_bf16_bits(1.0f)), 1.0f);
}

TEST(DType, RoundToDtypeAndNames) {
  EXPECT_EQ(round_to_dtype(1.0 + 1e-12, DType::kF64), 1.0 + 1e-12);
  EXPECT_EQ(round_to_dtype(1.0 + 1e-12, DType::kF32), 1.0);
  EXPECT_EQ(round_to_dtype(1.0 + 1e-3, DType::kF16), 1.0009765625);
  EXPECT_EQ(round_to_dtype(1.0 + 1e-3, DType::kBF16), 1.0);
  DType dt;
  for (const char* n : {"F64", "F32", "F16", "BF16", "I64"}) {
    ASSERT_TRUE(parse_dtype(n, &dt));
    EXPECT_STREQ(dtype_name(dt), n);
  }
  EXPECT_FALSE(parse_dtype("F8_E4M3", &dt));
}

TEST(DType, StridedToDoublesFollowsStrides) {
  // A [2, 3] view with strides {1, 2} over 6 floats is the transpose of a [3, 2] row-major matrix.
  const float data[6] = {0, 1, 2, 3, 4, 5};
  TensorView v(data, DType::kF32, {2, 3}, {1, 2});
  EXPECT_EQ(to_doubles(v), (std::vector<double>{0, 2, 4, 1, 3, 5}));
}

}  // namespace
}  // namespace hanpu
