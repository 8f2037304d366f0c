#include "kernels/decay.h"

#include <algorithm>
#include <cmath>

#include "kernels/gemm.h"

namespace hanpu {

void gate_cumsum(int64_t L, int64_t w, const float* g, double* G) {
  // Row by row, every channel at once (contiguous, vectorisable): each channel still sums its gates in
  // token order from 0.0, so the result is the same bit for bit as a per-channel loop.
  for (int64_t d = 0; d < w; ++d) G[d] = 0.0 + g[d];
  for (int64_t i = 1; i < L; ++i) {
    const double* prev = G + (i - 1) * w;
    const float* gi = g + i * w;
    double* Gi = G + i * w;
    for (int64_t d = 0; d < w; ++d) Gi[d] = prev[d] + gi[d];
  }
}

void decay_mask_scalar(int64_t L, const double* G, const float* rowscale, bool include_diag, float* X,
                       int64_t ldx) {
  for (int64_t i = 0; i < L; ++i) {
    float* x = X + i * ldx;
    const int64_t jend = include_diag ? i + 1 : i;
    const double rs = rowscale ? rowscale[i] : 1.0;
    for (int64_t j = 0; j < jend; ++j) x[j] = static_cast<float>(x[j] * rs * std::exp(G[i] - G[j]));
    for (int64_t j = jend; j < L; ++j) x[j] = 0.0f;
  }
}

void kda_intra_scores(int64_t L, int64_t K, const float* Q, const float* Kc, const double* G, const float* beta,
                      float* A, float* P, int64_t ld, float* scratch) {
  float* kl = scratch;                      // [L, K]  k_j * exp(G_n - G_j), j < n
  float* kr = scratch + L * K;              // [kIntraBlock, K]  k_i * exp(G_i - G_n)
  float* qr = kr + kIntraBlock * K;         // [kIntraBlock, K]  q_i * exp(G_i - G_n)
  for (int64_t r0 = 0; r0 < L; r0 += kIntraBlock) {
    const int64_t r1 = std::min(L, r0 + kIntraBlock), m = r1 - r0;
    const double* gn = G + r0 * K;
    if (r0 > 0) {
      for (int64_t j = 0; j < r0; ++j) {
        for (int64_t d = 0; d < K; ++d) kl[j * K + d] = static_cast<float>(Kc[j * K + d] * std::exp(gn[d] - G[j * K + d]));
      }
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t d = 0; d < K; ++d) {
          const double e = std::exp(G[i * K + d] - gn[d]);
          kr[(i - r0) * K + d] = static_cast<float>(Kc[i * K + d] * e);
          qr[(i - r0) * K + d] = static_cast<float>(Q[i * K + d] * e);
        }
      }
      gemm_f32(Trans::kN, Trans::kT, m, r0, K, 1.0f, kr, K, kl, K, 0.0f, A + r0 * ld, ld);
      gemm_f32(Trans::kN, Trans::kT, m, r0, K, 1.0f, qr, K, kl, K, 0.0f, P + r0 * ld, ld);
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = 0; j < r0; ++j) A[i * ld + j] *= beta[i];
      }
    }
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t j = r0; j <= i; ++j) {
        float sa = 0.0f, sp = 0.0f;
        for (int64_t d = 0; d < K; ++d) {
          const float e = static_cast<float>(std::exp(G[i * K + d] - G[j * K + d]));
          sa += Kc[i * K + d] * Kc[j * K + d] * e;
          sp += Q[i * K + d] * Kc[j * K + d] * e;
        }
        A[i * ld + j] = j < i ? beta[i] * sa : 0.0f;
        P[i * ld + j] = sp;
      }
      for (int64_t j = i; j < L; ++j) A[i * ld + j] = 0.0f;
      for (int64_t j = i + 1; j < L; ++j) P[i * ld + j] = 0.0f;
    }
  }
}

}  // namespace hanpu
