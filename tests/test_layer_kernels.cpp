// The layer's SIMD conv + SiLU tile (layer/conv_kernels.h) against its plain loops: odd channel counts (a
// vector tail), one and several taps, with and without bias, fp32 and bf16 rounding and output. The
// products are the same fused multiply-adds in the same order, so the conv sums agree exactly; only exp
// differs (Highway's vs libm's, a few ulp): fp32 outputs agree to 1e-6 relative, bf16 outputs to one
// bf16 step where a value sits at a rounding boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hanpu/tensor.h"
#include "layer/conv_kernels.h"

namespace hanpu::layer {
namespace {

TEST(LayerKernels, ConvSiluTileMatchesItsReference) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  for (int64_t w : {1, 5, 16, 37, 256}) {
    for (int64_t taps : {1, 4}) {
      for (int64_t n : {1, 3, 130}) {
        const int64_t ldw = w + 3, ldo = w + 7;
        std::vector<float> in((taps - 1 + n) * w), wts(taps * ldw), bias(w);
        for (float& x : in) x = nd(rng);
        for (float& x : wts) x = nd(rng) * 0.5f;
        for (float& x : bias) x = nd(rng) * 0.1f;
        for (int mode = 0; mode < 4; ++mode) {
          const bool round = mode & 1, out_bf16 = mode & 2;
          const float* b = mode == 1 ? nullptr : bias.data();
          std::vector<float> yf(n * ldo, -7.0f), rf(n * ldo, -7.0f);
          std::vector<uint16_t> yb(n * ldo, 7), rb(n * ldo, 7);
          void* y = out_bf16 ? static_cast<void*>(yb.data()) : yf.data();
          void* r = out_bf16 ? static_cast<void*>(rb.data()) : rf.data();
          conv_silu_tile(n, w, taps, in.data(), wts.data(), ldw, b, round, out_bf16, y, ldo);
          conv_silu_tile_reference(n, w, taps, in.data(), wts.data(), ldw, b, round, out_bf16, r, ldo);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t c = 0; c < ldo; ++c) {
              const int64_t i = t * ldo + c;
              if (c >= w) {  // beyond the tile: untouched
                EXPECT_EQ(yf[i], -7.0f);
                EXPECT_EQ(yb[i], 7);
                continue;
              }
              if (out_bf16) {
                EXPECT_LE(std::abs(int(yb[i]) - int(rb[i])), 1) << "w " << w << " taps " << taps << " n " << n;
              } else {
                EXPECT_NEAR(yf[i], rf[i], 1e-6f * std::max(1.0f, std::abs(rf[i]))) << "w " << w << " mode " << mode;
              }
            }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hanpu::layer
