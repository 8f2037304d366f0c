// The layer's SIMD vector passes (layer/vector_kernels.h) against their plain loops. The conv + SiLU tile: odd
// channel counts (a vector tail), one and several taps, with and without bias, fp32 and bf16 rounding and
// output; the products are the same fused multiply-adds in the same order, so the conv sums agree exactly;
// only exp differs (the vector ExpOf vs libm's, a few ulp): fp32 outputs agree to 1e-6 relative, bf16
// outputs to one bf16 step where a value sits at a rounding boundary. The gated RMSNorm likewise (its sum
// of squares in another order, in double). Both at gate and conv values far out, where exp overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hanpu/tensor.h"
#include "layer/bf16_weights_matmul.h"
#include "layer/matmul.h"
#include "layer/vector_kernels.h"

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

// y = silu(a) for one tap of weight 1 and no bias over the inputs a, fp32 out.
std::vector<float> silu_by_tile(const std::vector<float>& a, bool reference) {
  const int64_t w = static_cast<int64_t>(a.size());
  const std::vector<float> wts(w, 1.0f);
  std::vector<float> y(w);
  (reference ? conv_silu_tile_reference : conv_silu_tile)(1, w, 1, a.data(), wts.data(), w, nullptr, false, false,
                                                          y.data(), w);
  return y;
}

TEST(LayerKernels, ConvSiluTileIsRightWhereExpOverflows) {
  // silu(a) = a / (1 + e^-a): below a ~ -88.7 e^-a is infinite and silu(a) is -0; far above, a itself.
  // Highway's own Exp wrapped around past 177 (e^180 came out ~1e-29), so silu(-180) was -180.
  std::vector<float> a = {-1e30f, -1000.0f, -300.0f, -180.0f, -178.0f, -120.0f, -100.0f, -89.0f, -88.0f,
                          -30.0f, 30.0f, 100.0f, 180.0f, 1000.0f, 1e30f, HUGE_VALF};
  while (a.size() % 16 != 3) a.push_back(-200.0f);  // full vectors and a tail
  const std::vector<float> y = silu_by_tile(a, false), r = silu_by_tile(a, true);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(r[i])) {
      EXPECT_EQ(y[i], r[i]) << "a = " << a[i];
    } else {
      EXPECT_NEAR(y[i], r[i], 1e-6f * std::max(1.0f, std::abs(r[i]))) << "a = " << a[i];
    }
    if (a[i] <= -100.0f) {
      EXPECT_LE(std::abs(y[i]), 1e-40f) << "a = " << a[i];
    } else if (a[i] >= 100.0f) {
      EXPECT_EQ(y[i], a[i]) << "a = " << a[i];
    }
  }
  // -inf: -inf / (1 + inf) is NaN, as libm's and torch's silu give; NaN stays NaN.
  const std::vector<float> odd = {-HUGE_VALF, std::nanf("")};
  for (float v : silu_by_tile(odd, false)) EXPECT_TRUE(std::isnan(v));
}

// o, z as fp32 or bf16 rows; returns the normed o widened to fp32.
std::vector<float> norm_by(bool reference, int64_t groups, int64_t V, bool gdn, bool bf16, const std::vector<float>& w,
                           const std::vector<float>& o, const std::vector<float>& z) {
  const float eps = 1e-6f;
  auto fn = reference ? gated_rms_norm_reference : gated_rms_norm;
  std::vector<float> out(o.size());
  if (bf16) {
    std::vector<uint16_t> ob(o.size()), zb(z.size());
    for (size_t i = 0; i < o.size(); ++i) ob[i] = f32_to_bf16_bits(o[i]);
    for (size_t i = 0; i < z.size(); ++i) zb[i] = f32_to_bf16_bits(z[i]);
    fn(groups, V, gdn, eps, w.data(), true, ob.data(), zb.data());
    for (size_t i = 0; i < o.size(); ++i) out[i] = bf16_bits_to_f32(ob[i]);
  } else {
    out = o;
    fn(groups, V, gdn, eps, w.data(), false, out.data(), z.data());
  }
  return out;
}

// A decode step's windows as the tile's rows: a pure widening copy, so bit for bit the plain loop's, for vector
// tails (w off the lanes), the deinterleaved four-tap form and the lane-by-lane forms of other tap counts and
// of strided windows (padded, and tap-major: a pool stored [.., taps, C]), fp32 and bf16 windows; nothing past
// the taps - 1 rows is written.
TEST(LayerKernels, ConvWindowRowsMatchItsReference) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int64_t w : {1, 7, 16, 17, 33, 517}) {
    for (int64_t taps : {1, 2, 4, 5}) {
      const std::pair<int64_t, int64_t> strides[] = {{taps, 1}, {taps + 1, 1}, {1, w}};  // (ldc, ldt)
      for (const auto& [ldc, ldt] : strides) {
        for (bool bf16 : {false, true}) {
          const int64_t n = (w - 1) * ldc + (taps - 1) * ldt + 1;
          std::vector<float> xf(n);
          std::vector<uint16_t> xb(n);
          for (int64_t i = 0; i < n; ++i) {
            xb[i] = f32_to_bf16_bits(nd(rng));
            xf[i] = nd(rng);
          }
          const void* x = bf16 ? static_cast<const void*>(xb.data()) : xf.data();
          const int64_t rows = taps - 1;
          std::vector<float> got(rows * w + 3, -9.0f), want(rows * w + 3, -9.0f);
          conv_window_rows(w, taps, x, ldc, ldt, bf16, got.data());
          conv_window_rows_reference(w, taps, x, ldc, ldt, bf16, want.data());
          ASSERT_EQ(got, want) << "w " << w << " taps " << taps << " strides " << ldc << ", " << ldt
                               << (bf16 ? " bf16" : " fp32");
          for (int64_t c = 0; c < w && rows > 0; ++c) {  // the reference itself: row j holds tap j + 1
            const int64_t i = c * ldc + (taps - 1) * ldt;
            ASSERT_EQ(want[(rows - 1) * w + c], bf16 ? bf16_bits_to_f32(xb[i]) : xf[i]);
          }
        }
      }
    }
  }
}

TEST(LayerKernels, GatedRmsNormMatchesItsReference) {
  std::mt19937_64 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t V : {1, 5, 16, 37, 128}) {
    for (int64_t groups : {1, 3}) {
      std::vector<float> w(V), o(groups * V), z(groups * V);
      for (float& x : w) x = 1.0f + 0.2f * nd(rng);
      for (float& x : o) x = 3.0f * nd(rng);
      for (float& x : z) x = 2.0f * nd(rng);
      z[0] = -200.0f;  // e^200 overflows: silu -> -0, sigmoid -> 0
      if (z.size() > 1) z[1] = 200.0f;
      for (int mode = 0; mode < 4; ++mode) {
        const bool gdn = mode & 1, bf16 = mode & 2;
        const std::vector<float> y = norm_by(false, groups, V, gdn, bf16, w, o, z);
        const std::vector<float> r = norm_by(true, groups, V, gdn, bf16, w, o, z);
        const std::string what = "V " + std::to_string(V) + " groups " + std::to_string(groups) + " gdn " +
                                 std::to_string(gdn) + " bf16 " + std::to_string(bf16);
        for (size_t i = 0; i < y.size(); ++i) {
          // one bf16 step (2^-7 relative) where a value sits at a rounding boundary; fp32 to a few ulp
          const float tol = (bf16 ? 8e-3f : 2e-6f) * std::abs(r[i]);
          EXPECT_NEAR(y[i], r[i], tol) << what << " i " << i;
        }
        EXPECT_EQ(y[0], 0.0f) << what;  // gate -200: +-0
      }
    }
  }
}

TEST(LayerKernels, GatedRmsNormLeavesNaNAndZeroRowsWellDefined) {
  // An all-zero row: r = 1/sqrt(eps), outputs 0. A NaN in a row makes that row NaN and no other.
  const int64_t V = 20;
  const std::vector<float> w(V, 1.0f), z(2 * V, 1.0f);
  std::vector<float> o(2 * V, 0.0f);
  for (bool bf16 : {false, true}) {
    for (bool gdn : {false, true}) {
      for (float v : norm_by(false, 2, V, gdn, bf16, w, o, z)) EXPECT_EQ(v, 0.0f);
      std::vector<float> on = o;
      on[3] = std::nanf("");
      for (int64_t k = 0; k < V; ++k) on[V + k] = 1.0f;
      const std::vector<float> y = norm_by(false, 2, V, gdn, bf16, w, on, z);
      for (int64_t k = 0; k < V; ++k) EXPECT_TRUE(std::isnan(y[k])) << k;
      for (int64_t k = 0; k < V; ++k) EXPECT_TRUE(std::isfinite(y[V + k])) << k;
    }
  }
}

// A projection weight made from `w` ([N, Kd] of dtype) on `route`; fails the test when it cannot be made.
ProjectionWeight weight_of(int64_t N, int64_t Kd, DType dtype, const void* w, Bf16Route route = Bf16Route::kAuto) {
  ProjectionWeight pw;
  const Status s = ProjectionWeight::make(N, Kd, dtype, w, route, &pw);
  EXPECT_TRUE(s.ok()) << s.message();
  return pw;
}

// The projections' bf16 routes (layer/matmul.h) against an fp64 product of the same bf16 values: row counts
// crossing the pairs route's 256-row blocks, columns crossing its 64-column blocks, odd and even depths,
// strided x and y, fp32 and bf16 output; elements of y beyond N untouched. Both routes accumulate in fp32, so
// each output is within fp32 accumulation error of the exact sum (bounded by Kd 2^-24 sum |x w|), plus half a
// bf16 step. The pairs route sums each column in K order whatever the split: 1, 2 and 3 workers give the same
// bits.
TEST(LayerMatmul, Bf16RoutesMatchTheExactProduct) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t Kd : {48, 49}) {
    for (int64_t M : {1, 40, 300}) {
      for (int64_t N : {5, 1030}) {
        const int64_t ldx = Kd + 3, ldy = N + 2;
        std::vector<uint16_t> x(M * ldx), w(N * Kd);
        for (auto& v : x) v = f32_to_bf16_bits(nd(rng));
        for (auto& v : w) v = f32_to_bf16_bits(nd(rng));
        std::vector<double> ref(M * N), mag(M * N);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double acc = 0, a = 0;
            for (int64_t k = 0; k < Kd; ++k) {
              const double p = double(bf16_bits_to_f32(x[m * ldx + k])) * bf16_bits_to_f32(w[n * Kd + k]);
              acc += p, a += std::abs(p);
            }
            ref[m * N + n] = acc, mag[m * N + n] = a;
          }
        for (Bf16Route route : {Bf16Route::kNative, Bf16Route::kPairs, Bf16Route::kAuto}) {
          const ProjectionWeight pw = weight_of(N, Kd, DType::kBF16, w.data(), route);
          for (DType out : {DType::kF32, DType::kBF16}) {
            std::vector<float> first_f;
            std::vector<uint16_t> first_b;
            for (int threads : {2, 1, 3}) {
              std::vector<float> yf(M * ldy, -7.0f);
              std::vector<uint16_t> yb(M * ldy, 7);
              void* y = out == DType::kF32 ? static_cast<void*>(yf.data()) : yb.data();
              const Status s = matmul_nt(M, x.data(), ldx, pw, out, y, ldy, threads);
              const std::string what = "Kd " + std::to_string(Kd) + " M " + std::to_string(M) + " N " +
                                       std::to_string(N) + " route " + std::to_string(static_cast<int>(pw.route())) +
                                       " out " + dtype_name(out) + " threads " + std::to_string(threads);
              if (pw.route() == Bf16Route::kNative && s.code() == StatusCode::kUnimplemented) {
                EXPECT_FALSE(onednn_native_bf16()) << what;  // a oneDNN without bf16 kernels (Debian's arm64)
                break;
              }
              ASSERT_TRUE(s.ok()) << what << ": " << s.message();
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < ldy; ++n) {
                  const int64_t i = m * ldy + n;
                  if (n >= N) {
                    ASSERT_TRUE(out == DType::kF32 ? yf[i] == -7.0f : yb[i] == 7) << what << " wrote beyond N";
                    continue;
                  }
                  const double r = ref[m * N + n], got = out == DType::kF32 ? yf[i] : bf16_bits_to_f32(yb[i]);
                  const double tol = Kd * 0x1p-24 * mag[m * N + n] + (out == DType::kBF16 ? 0x1p-8 * std::abs(r) : 0.0);
                  ASSERT_NEAR(got, r, tol * 1.01 + 1e-30) << what << " m " << m << " n " << n;
                }
              if (pw.route() != Bf16Route::kPairs) break;  // oneDNN's blocking may follow the thread count
              if (first_f.empty() && first_b.empty()) {
                first_f = yf, first_b = yb;
              } else {
                EXPECT_TRUE(yf == first_f && yb == first_b) << what << ": differs from 2 workers";
              }
            }
          }
        }
      }
    }
  }
}

// The bf16-pairs kernel (layer/bf16_weights_matmul.h): its packing element by element, then the kernel
// against its plain loop bit for bit (both sum each column in K order by fused multiply-adds): row counts
// around its 4-row passes, column ranges within, at and across the 64-column blocks and starting at a later
// block, odd and even depths, fp32 and bf16 y (strided); columns outside [n0, n1) untouched.
TEST(LayerKernels, Bf16PairsMatmulMatchesItsReference) {
  std::mt19937_64 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t Kd : {7, 32, 77}) {
    const int64_t Kp = bf16_pairs_depth(Kd), N = 200;
    std::vector<uint16_t> w(N * Kd);
    for (uint16_t& v : w) v = f32_to_bf16_bits(nd(rng));
    AlignedVector<uint32_t> packed(bf16_pairs_size(N, Kd));
    pack_bf16_pairs(N, Kd, w.data(), packed.data());
    ASSERT_EQ(packed.size(), static_cast<std::size_t>(4 * Kp * kPairCols));
    for (int64_t n = 0; n < 4 * kPairCols; ++n)
      for (int64_t k = 0; k < 2 * Kp; ++k) {
        const uint32_t pair = packed[(n / kPairCols * Kp + k / 2) * kPairCols + n % kPairCols];
        const uint16_t got = static_cast<uint16_t>(k % 2 ? pair >> 16 : pair);
        ASSERT_EQ(got, n < N && k < Kd ? w[n * Kd + k] : 0) << "Kd " << Kd << " n " << n << " k " << k;
      }
    for (int64_t M : {1, 3, 4, 5, 9}) {
      std::vector<float> x(M * 2 * Kp);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < 2 * Kp; ++k) x[m * 2 * Kp + k] = k < Kd ? bf16_bits_to_f32(f32_to_bf16_bits(nd(rng))) : 0.0f;
      for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 1}, {0, 64}, {64, 130}, {0, 200}, {128, 200}}) {
        const int64_t ldy = N + 1;
        for (bool y_bf16 : {false, true}) {
          std::vector<float> yf(M * ldy, -7.0f), rf(M * ldy, -7.0f);
          std::vector<uint16_t> yb(M * ldy, 7), rb(M * ldy, 7);
          void* y = y_bf16 ? static_cast<void*>(yb.data()) : yf.data();
          void* r = y_bf16 ? static_cast<void*>(rb.data()) : rf.data();
          bf16_pairs_matmul(M, n0, n1, Kp, x.data(), packed.data(), y_bf16, y, ldy);
          bf16_pairs_matmul_reference(M, n0, n1, Kp, x.data(), packed.data(), y_bf16, r, ldy);
          const std::string what = "M " + std::to_string(M) + " Kd " + std::to_string(Kd) + " n " + std::to_string(n0) +
                                   ".." + std::to_string(n1) + (y_bf16 ? " bf16" : " f32");
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < ldy; ++n) {
              const int64_t i = m * ldy + n;
              if (n < n0 || n >= n1) {
                ASSERT_TRUE(y_bf16 ? yb[i] == 7 : yf[i] == -7.0f) << what << " wrote column " << n;
              } else if (y_bf16) {
                ASSERT_EQ(yb[i], rb[i]) << what << " m " << m << " n " << n;
              } else {
                ASSERT_EQ(yf[i], rf[i]) << what << " m " << m << " n " << n;
              }
            }
        }
      }
    }
  }
}

// fp32 products on the engine's pool (layer/matmul.cpp): a dense y with many rows splits by rows, few rows or
// a strided y by W's rows through each worker's own block; 1, 2 and 3 workers (an uneven split), widths
// below, at and across the 64-column slices; each element within fp32 accumulation error of the fp64 sum,
// nothing written beyond N. Every split computes each element as the same dot product over Kd, so the
// results of 1, 2 and 3 workers agree.
TEST(LayerMatmul, Fp32SplitsOverThePoolMatchTheExactProduct) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t Kd = 72;
  for (int64_t M : {1, 40, 700}) {
    for (int64_t N : {5, 64, 200}) {
      for (int64_t pad : {0, 3}) {  // 0: a dense y (row split for M = 700), 3: strided
        const int64_t ldx = Kd + 1, ldy = N + pad;
        std::vector<float> x(M * ldx), w(N * Kd);
        for (float& v : x) v = nd(rng);
        for (float& v : w) v = nd(rng);
        const ProjectionWeight pw = weight_of(N, Kd, DType::kF32, w.data());
        std::vector<float> first;
        for (int threads : {1, 2, 3}) {
          std::vector<float> y(M * ldy, -7.0f);
          const std::string what = "M " + std::to_string(M) + " N " + std::to_string(N) + " ldy " +
                                   std::to_string(ldy) + " threads " + std::to_string(threads);
          ASSERT_TRUE(matmul_nt(M, x.data(), ldx, pw, DType::kF32, y.data(), ldy, threads).ok()) << what;
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < ldy; ++n) {
              const float got = y[m * ldy + n];
              if (n >= N) {
                ASSERT_EQ(got, -7.0f) << what << " wrote beyond N";
                continue;
              }
              double r = 0, mag = 0;
              for (int64_t k = 0; k < Kd; ++k) {
                const double p = double(x[m * ldx + k]) * w[n * Kd + k];
                r += p, mag += std::abs(p);
              }
              ASSERT_NEAR(got, r, Kd * 0x1p-24 * mag * 1.01) << what << " m " << m << " n " << n;
            }
          if (first.empty()) {
            first = y;
          } else {
            EXPECT_EQ(y, first) << what << ": differs from 1 worker";
          }
        }
      }
    }
  }
}

// Callers on several threads at once (a server's request threads): each thread's primitives are its own, so
// concurrent products are each exactly what one caller alone gets.
TEST(LayerMatmul, ConcurrentCallersGetTheirOwnProducts) {
  const int64_t M = 24, N = 300, Kd = 96;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> xs(3, std::vector<float>(M * Kd)), alone(3);
  std::vector<float> w(N * Kd);
  for (float& v : w) v = nd(rng);
  for (auto& x : xs)
    for (float& v : x) v = nd(rng);
  const ProjectionWeight pw = weight_of(N, Kd, DType::kF32, w.data());
  for (int i = 0; i < 3; ++i) {
    alone[i].assign(M * N, 0.0f);
    ASSERT_TRUE(matmul_nt(M, xs[i].data(), Kd, pw, DType::kF32, alone[i].data(), N, 1).ok());
  }
  std::vector<std::vector<float>> got(3, std::vector<float>(M * N, 0.0f));
  std::vector<int> failures(3, 0);
  std::vector<std::thread> callers;
  for (int i = 0; i < 3; ++i)
    callers.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) {
        if (!matmul_nt(M, xs[i].data(), Kd, pw, DType::kF32, got[i].data(), N, 1 + i % 2).ok() ||
            got[i] != alone[i])
          ++failures[i];
      }
    });
  for (auto& t : callers) t.join();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(failures[i], 0) << "caller " << i;
}

TEST(LayerMatmul, RejectsBadArguments) {
  float x[2] = {1, 1}, w[2] = {1, 1}, y[2] = {0, 0};
  ProjectionWeight pw;
  const auto message = [](const Status& s) { return s.code() == StatusCode::kInvalidArgument ? s.message() : "accepted"; };
  EXPECT_NE(message(ProjectionWeight::make(1, 1, DType::kF16, w, Bf16Route::kAuto, &pw)).find("dtype"), std::string::npos);
  EXPECT_NE(message(ProjectionWeight::make(1, 0, DType::kF32, w, Bf16Route::kAuto, &pw)).find("Kd >= 1"), std::string::npos);
  EXPECT_NE(message(ProjectionWeight::make(1, 1, DType::kF32, nullptr, Bf16Route::kAuto, &pw)).find("null"),
            std::string::npos);
  ASSERT_TRUE(ProjectionWeight::make(1, 2, DType::kF32, w, Bf16Route::kAuto, &pw).ok());
  EXPECT_NE(message(matmul_nt(1, x, 2, pw, DType::kI64, y, 1, 1)).find("y's dtype"), std::string::npos);
  EXPECT_NE(message(matmul_nt(1, x, 1, pw, DType::kF32, y, 1, 1)).find("ldx 1 < Kd 2"), std::string::npos);
  ASSERT_TRUE(matmul_nt(1, x, 2, pw, DType::kF32, y, 1, 1).ok());
  EXPECT_EQ(y[0], 2.0f);
}

}  // namespace
}  // namespace hanpu::layer
