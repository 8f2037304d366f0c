// Index arithmetic past 2^31: q and k of B T H K = 2^31 elements (T = 131072, H = 64, K = 256), so that
// every element offset, numel and per-head base beyond 2^31 must be 64-bit. A 32-bit wrap anywhere would
// read another head's (or unmapped) memory: the last and first value heads of the big call must equal,
// bit for bit, the same heads run alone from compact copies whose offsets are small.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <memory>

#include "hanpu/engine.h"
#include "test_util.h"

namespace hanpu {
namespace {

constexpr int64_t kT = 131072, kH = 64, kK = 256;  // q: 2^17 * 2^6 * 2^8 = 2^31 elements

// Cheap deterministic bf16 values in +-[1, 2): sign and mantissa from a xorshift stream.
uint16_t next_bf16(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return static_cast<uint16_t>(0x3F80u | (*s & 0x7Fu) | ((*s >> 8) & 1u) << 15);
}

// MemAvailable of /proc/meminfo (free memory plus what the page cache would give back), in bytes.
int64_t available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (f >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    f.ignore(64, '\n');
  }
  return 0;
}

TEST(LargeIndex, TwoToThe31ElementsOfQAndK) {
  const int64_t n = kT * kH * kK;
  ASSERT_EQ(n, int64_t{1} << 31);
  // q and k are two views of one buffer (k one element later): 4 GiB of bf16 instead of 8.
  const int64_t need = (n + kK) * 2 + (int64_t{1} << 30);
  if (available_bytes() < need) {
    GTEST_SKIP() << "needs " << (need >> 20) << " MiB of free memory, " << (available_bytes() >> 20) << " available";
  }
  std::unique_ptr<uint16_t[]> qk(new uint16_t[n + kK]);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < n + kK; ++i) qk[i] = next_bf16(&s);
  std::mt19937_64 rng(1);
  const Tensor v = testing::random_tensor(DType::kF32, {1, kT, kH, 1}, rng);
  Tensor g(DType::kF32, {1, kT, kH}), beta(DType::kF32, {1, kT, kH});
  {
    float* gp = reinterpret_cast<float*>(g.bytes.data());
    float* bp = reinterpret_cast<float*>(beta.bytes.data());
    for (int64_t i = 0; i < kT * kH; ++i) {
      gp[i] = -0.01f - 0.5f * static_cast<float>(i % 97) / 97.0f;
      bp[i] = 0.1f + 0.8f * static_cast<float>(i % 89) / 89.0f;
    }
  }
  Inputs in;
  in.q = TensorView(qk.get(), DType::kBF16, {1, kT, kH, kK});
  in.k = TensorView(qk.get() + 1, DType::kBF16, {1, kT, kH, kK});
  in.v = v.view();
  in.g = g.view();
  in.beta = beta.view();
  Options opt;
  opt.chunk_size = 16;  // the cheapest chunk: the index arithmetic is the same, the GEMMs 4x smaller
  opt.use_qk_l2norm_in_kernel = true;
  EngineConfig cfg;
  cfg.threads = 2;
  Tensor o(DType::kF32, {1, kT, kH, 1}), state(DType::kF32, {1, kH, kK, 1});
  ASSERT_TRUE(engine_forward(in, opt, cfg, Outputs{o.view(), state.view()}).ok());

  for (int64_t h : {kH - 1, int64_t{0}}) {
    // head h alone, from compact copies (offsets below 2^25)
    Tensor q1(DType::kBF16, {1, kT, 1, kK}), k1(DType::kBF16, {1, kT, 1, kK});
    Tensor v1(DType::kF32, {1, kT, 1, 1}), g1(DType::kF32, {1, kT, 1}), b1(DType::kF32, {1, kT, 1});
    for (int64_t t = 0; t < kT; ++t) {
      const int64_t row = (t * kH + h) * kK;
      std::memcpy(q1.bytes.data() + t * kK * 2, qk.get() + row, kK * 2);
      std::memcpy(k1.bytes.data() + t * kK * 2, qk.get() + row + 1, kK * 2);
      std::memcpy(v1.bytes.data() + t * 4, v.bytes.data() + (t * kH + h) * 4, 4);
      std::memcpy(g1.bytes.data() + t * 4, g.bytes.data() + (t * kH + h) * 4, 4);
      std::memcpy(b1.bytes.data() + t * 4, beta.bytes.data() + (t * kH + h) * 4, 4);
    }
    Inputs one{q1.view(), k1.view(), v1.view(), g1.view(), b1.view(), {}, {}, {}, {}};
    Tensor o1(DType::kF32, {1, kT, 1, 1}), s1(DType::kF32, {1, 1, kK, 1});
    ASSERT_TRUE(engine_forward(one, opt, cfg, Outputs{o1.view(), s1.view()}).ok());
    const float* big = reinterpret_cast<const float*>(o.bytes.data());
    const float* alone = reinterpret_cast<const float*>(o1.bytes.data());
    int64_t differing = 0;
    for (int64_t t = 0; t < kT; ++t) differing += big[t * kH + h] != alone[t];
    EXPECT_EQ(differing, 0) << "head " << h << ": outputs differ from the head run alone";
    EXPECT_EQ(std::memcmp(state.bytes.data() + h * kK * 4, s1.bytes.data(), kK * 4), 0) << "head " << h;
    EXPECT_TRUE(testing::all_finite(o1));
  }
}

}  // namespace
}  // namespace hanpu
