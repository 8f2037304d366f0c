// Every kernel building block against a scalar double-precision reference on edge shapes: 1, odd sizes,
// tile sizes +-1, leading dimensions wider than the rows, and operands starting at unaligned addresses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/decay.h"
#include "kernels/gemm.h"
#include "kernels/tril_inverse.h"

namespace hanpu {
namespace {

std::vector<float> randn(std::size_t n, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<float> nd(0.0f, static_cast<float>(sd));
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

double rel_err(const std::vector<double>& ref, const float* got, int64_t rows, int64_t cols, int64_t ld) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const double d = got[i * ld + j] - ref[i * cols + j];
      num += d * d;
      den += ref[i * cols + j] * ref[i * cols + j];
    }
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

TEST(Gemm, MatchesScalarReferenceOnEdgeShapes) {
  std::mt19937_64 rng(1);
  const int64_t sizes[] = {1, 2, 15, 16, 17, 33, 63, 64, 65};
  for (Trans ta : {Trans::kN, Trans::kT}) {
    for (Trans tb : {Trans::kN, Trans::kT}) {
      for (int64_t M : sizes) {
        for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{64}}) {
          for (int64_t Kd : {int64_t{1}, int64_t{16}, int64_t{65}}) {
            const int64_t a_rows = ta == Trans::kN ? M : Kd, a_cols = ta == Trans::kN ? Kd : M;
            const int64_t b_rows = tb == Trans::kN ? Kd : N, b_cols = tb == Trans::kN ? N : Kd;
            const int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = N + 2;  // padded rows
            // +1: operands start at an address that is not 8- or 16-byte aligned
            std::vector<float> A = randn(a_rows * lda + 1, rng), B = randn(b_rows * ldb + 1, rng);
            std::vector<float> C = randn(M * ldc + 1, rng), C0 = C;
            const float alpha = 0.75f, beta = -0.5f;
            gemm_f32(ta, tb, M, N, Kd, alpha, A.data() + 1, lda, B.data() + 1, ldb, beta, C.data() + 1, ldc);
            for (int64_t i = 0; i < M; ++i) {
              for (int64_t j = 0; j < N; ++j) {
                double acc = 0, mag = 0;
                for (int64_t p = 0; p < Kd; ++p) {
                  const double a = ta == Trans::kN ? A[1 + i * lda + p] : A[1 + p * lda + i];
                  const double b = tb == Trans::kN ? B[1 + p * ldb + j] : B[1 + j * ldb + p];
                  acc += a * b;
                  mag += std::fabs(a * b);
                }
                const double want = alpha * acc + beta * C0[1 + i * ldc + j];
                // fp32 accumulation error bound: a few ulp per term of the magnitude sum
                const double tol = 4e-7 * (Kd + 2) * (alpha * mag + std::fabs(beta * C0[1 + i * ldc + j]));
                ASSERT_NEAR(C[1 + i * ldc + j], want, tol) << M << "x" << N << "x" << Kd << " at " << i << "," << j;
              }
            }
            // padding columns of C are untouched
            for (int64_t i = 0; i < M; ++i) EXPECT_EQ(C[1 + i * ldc + N], C0[1 + i * ldc + N]);
          }
        }
      }
    }
  }
}

TEST(Gemm, BetaZeroIgnoresGarbageInC) {
  std::vector<float> A = {1, 2}, B = {3, 4}, C = {NAN};
  gemm_f32(Trans::kN, Trans::kT, 1, 1, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 1);
  EXPECT_EQ(C[0], 11.0f);
}

TEST(TrilInverse, MatchesForwardSubstitutionAndInverts) {
  std::mt19937_64 rng(2);
  for (int64_t n : {1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 63, 64}) {
    const int64_t lda = n + 5, ldt = n + 1;
    std::vector<float> A = randn(n * lda + 1, rng, 0.3), T(n * ldt + 1, 7.0f);
    const float* a = A.data() + 1;
    tril_unit_inverse(n, a, lda, T.data() + 1, ldt);
    // reference: column-by-column forward substitution of (I + A) X = I in double
    std::vector<double> X(n * n, 0.0);
    for (int64_t j = 0; j < n; ++j) {
      X[j * n + j] = 1.0;
      for (int64_t i = j + 1; i < n; ++i) {
        double acc = 0;
        for (int64_t r = j; r < i; ++r) acc += a[i * lda + r] * X[r * n + j];
        X[i * n + j] = -acc;
      }
    }
    EXPECT_LT(rel_err(X, T.data() + 1, n, n, ldt), 1e-5) << "n = " << n;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(T[1 + i * ldt + i], 1.0f);
      for (int64_t j = i + 1; j < n; ++j) EXPECT_EQ(T[1 + i * ldt + j], 0.0f);
    }
  }
}

TEST(Decay, GateCumsumIsInclusivePerColumnInDouble) {
  const float g[] = {-1, -2, -0.5f, -1000, -0.25f, 0};
  double G[6];
  gate_cumsum(3, 2, g, G);
  EXPECT_EQ(G[0], -1);
  EXPECT_EQ(G[1], -2);
  EXPECT_EQ(G[2], -1.5);
  EXPECT_EQ(G[3], -1002);
  EXPECT_EQ(G[4], -1.75);
  EXPECT_EQ(G[5], -1002);
  // A small gate after -1000 survives exactly; an fp32 running sum would keep it only to ~6e-5.
  const float h[] = {-1000, -1e-4f};
  double H[2];
  gate_cumsum(2, 1, h, H);
  EXPECT_EQ(H[1] - H[0], static_cast<double>(-1e-4f));
}

TEST(Decay, ScalarMaskMatchesDefinition) {
  std::mt19937_64 rng(4);
  for (int64_t L : {1, 5, 16, 33}) {
    std::vector<float> X = randn(L * L, rng), X0 = X, rs = randn(L, rng);
    std::vector<double> G(L);
    double acc = 0;
    for (int64_t i = 0; i < L; ++i) G[i] = (acc -= 0.3 * (i % 3));
    for (bool diag : {false, true}) {
      X = X0;
      decay_mask_scalar(L, G.data(), rs.data(), diag, X.data(), L);
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < L; ++j) {
          const bool keep = diag ? j <= i : j < i;
          const double want = keep ? X0[i * L + j] * rs[i] * std::exp(G[i] - G[j]) : 0.0;
          EXPECT_NEAR(X[i * L + j], want, 1e-5 * (1 + std::fabs(want)));
        }
      }
    }
  }
}

// A and P of kda_intra_scores against their definitions summed in double.
void check_kda_scores(int64_t L, int64_t K, const std::vector<double>& gate_per_token, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> Q = randn(L * K, rng), Kc = randn(L * K, rng), beta(L);
  std::uniform_real_distribution<float> ud(0.1f, 1.0f);
  for (float& b : beta) b = ud(rng);
  std::vector<float> g(L * K);
  for (int64_t i = 0; i < L * K; ++i) g[i] = static_cast<float>(gate_per_token[i % gate_per_token.size()]);
  std::vector<double> G(L * K);
  gate_cumsum(L, K, g.data(), G.data());
  const int64_t ld = L + 3;
  std::vector<float> A(L * ld, 9.0f), P(L * ld, 9.0f), scratch((L + 2 * kIntraBlock) * K);
  kda_intra_scores(L, K, Q.data(), Kc.data(), G.data(), beta.data(), A.data(), P.data(), ld, scratch.data());
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < L; ++j) {
      double sa = 0, sp = 0;
      for (int64_t d = 0; d < K; ++d) {
        const double e = j <= i ? std::exp(G[i * K + d] - G[j * K + d]) : 0.0;
        sa += static_cast<double>(Kc[i * K + d]) * Kc[j * K + d] * e;
        sp += static_cast<double>(Q[i * K + d]) * Kc[j * K + d] * e;
      }
      const double wa = j < i ? beta[i] * sa : 0.0, wp = j <= i ? sp : 0.0;
      ASSERT_TRUE(std::isfinite(A[i * ld + j]) && std::isfinite(P[i * ld + j]));
      EXPECT_NEAR(A[i * ld + j], wa, 1e-5 * (1 + std::fabs(wa))) << L << " " << K << " " << i << "," << j;
      EXPECT_NEAR(P[i * ld + j], wp, 1e-5 * (1 + std::fabs(wp))) << L << " " << K << " " << i << "," << j;
    }
  }
}

TEST(Decay, KdaIntraScoresMatchDefinition) {
  for (int64_t L : {1, 2, 15, 16, 17, 31, 32, 33, 64}) {
    for (int64_t K : {1, 3, 16, 17, 64}) check_kda_scores(L, K, {-0.1, -0.02, -0.7, -0.3, -0.05}, L * 100 + K);
  }
}

TEST(Decay, KdaIntraScoresStayFiniteWithGatesOfMinus1000) {
  for (int64_t L : {16, 33, 64}) check_kda_scores(L, 17, {-0.1, -1000, -0.01, -0.5, 0.0, -1000, -3}, L);
}

}  // namespace
}  // namespace hanpu
