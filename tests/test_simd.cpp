// The Highway kernels against scalar references, on every target this build compiled and this CPU runs.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/simd.h"

namespace hanpu {
namespace {

std::vector<float> randn(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

void check_gemm(bool trans_a, int64_t M, int64_t N, int64_t Kd, std::mt19937_64& rng, const char* target) {
  const int64_t lda = (trans_a ? M : Kd) + 3, ldb = N + 1, ldc = N + 2;
  const int64_t a_rows = trans_a ? Kd : M;
  std::vector<float> A = randn(a_rows * lda + 1, rng), B = randn(Kd * ldb + 1, rng), C = randn(M * ldc + 1, rng);
  const std::vector<float> C0 = C;
  for (bool acc : {false, true}) {
    C = C0;
    if (trans_a) {
      simd::gemm_tn(M, N, Kd, A.data() + 1, lda, B.data() + 1, ldb, acc, C.data() + 1, ldc);
    } else {
      simd::gemm_nn(M, N, Kd, A.data() + 1, lda, B.data() + 1, ldb, acc, C.data() + 1, ldc);
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double want = acc ? C0[1 + i * ldc + j] : 0.0, mag = std::fabs(want);
        for (int64_t p = 0; p < Kd; ++p) {
          const double a = trans_a ? A[1 + p * lda + i] : A[1 + i * lda + p];
          want += a * B[1 + p * ldb + j];
          mag += std::fabs(a * B[1 + p * ldb + j]);
        }
        ASSERT_NEAR(C[1 + i * ldc + j], want, 4e-7 * (Kd + 2) * mag)
            << target << (trans_a ? " TN " : " NN ") << M << "x" << N << "x" << Kd << " at " << i << "," << j;
      }
      EXPECT_EQ(C[1 + i * ldc + N], C0[1 + i * ldc + N]);  // padding untouched
    }
  }
}

TEST(Simd, EveryKernelMatchesItsScalarReferenceOnEveryTarget) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().DeInit();  // the next dispatch chooses among the mocked targets
    EXPECT_STREQ(simd::target_name(), hwy::TargetName(target));
    const char* name = hwy::TargetName(target);
    std::mt19937_64 rng(target);
    const int64_t cb = simd::gemm_column_block();
    for (bool trans_a : {false, true}) {
      for (int64_t M : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{17}}) {
        for (int64_t N : {int64_t{1}, cb - 1, cb, cb + 1, 2 * cb + cb / 2 + 3}) {
          for (int64_t Kd : {int64_t{1}, int64_t{16}, int64_t{33}}) check_gemm(trans_a, M, N, Kd, rng, name);
        }
      }
    }
    // exp over the range the engine uses (exponents <= 0, down to underflow), and a little above 0
    std::vector<float> x, y;
    for (float v = -100.0f; v <= 5.0f; v += 0.37f) x.push_back(v);
    y.resize(x.size());
    simd::exp_f32(static_cast<int64_t>(x.size()), x.data(), y.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      EXPECT_NEAR(y[i], want, 4e-7 * want + 1e-38) << name << " exp(" << x[i] << ")";
    }
    // row scaling (all three scale widths, with and without a row factor), residual, sum of squares
    const int64_t rows = 7, cols = 2 * cb + 3;
    std::vector<float> src = randn(rows * cols, rng), sc = randn(rows * cols, rng), rs = randn(rows, rng);
    for (int64_t sw : {int64_t{0}, int64_t{1}, cols}) {
      for (const float* rowscale : {static_cast<const float*>(nullptr), static_cast<const float*>(rs.data())}) {
        std::vector<float> dst(rows * cols);
        simd::scale_rows(rows, cols, src.data(), cols, sc.data(), sw, rowscale, dst.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const double want = static_cast<double>(src[r * cols + c]) * sc[r * sw + (sw > 1 ? c : 0)] *
                                (rowscale ? rowscale[r] : 1.0f);
            EXPECT_NEAR(dst[r * cols + c], want, 1e-6 * (1 + std::fabs(want))) << name << " sw=" << sw;
          }
        }
      }
    }
    std::vector<float> out(rows * cols);
    simd::beta_residual(rows, cols, rs.data(), src.data(), sc.data(), out.data());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double want = static_cast<double>(rs[i / cols]) * (src[i] - sc[i]);
      EXPECT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(want))) << name;
    }
    double ss = 0;
    for (float v : src) ss += static_cast<double>(v) * v;
    EXPECT_NEAR(simd::sum_squares(rows * cols, src.data()), ss, 1e-6 * ss) << name;
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().DeInit();
}

}  // namespace
}  // namespace hanpu
