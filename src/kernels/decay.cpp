#include "kernels/decay.h"

#include <algorithm>
#include <cmath>

#include "core/aligned.h"
#include "kernels/gemm.h"
#include "kernels/kernel_set.h"
#include "kernels/pack.h"
#include "kernels/simd.h"

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

void decay_mask_by_entries(ExpF32Fn exp, int64_t L, const double* G, const float* cf, const float* ra,
                           const float* rp, float* a, float* p, int64_t ld) {
  const auto e_of = [exp](double x) {
    const float xf = static_cast<float>(x);
    float y;
    exp(1, &xf, &y);
    return y;
  };
  for (int64_t i = 0; i < L; ++i) {
    const int64_t i0 = i / kIntraBlock * kIntraBlock, anchor = i0 + (i - i0) / kDecayAnchorRows * kDecayAnchorRows;
    const float sa = ra ? ra[i] : 1.0f, sp = rp ? rp[i] : 1.0f;
    for (int64_t j = 0; j < L; ++j) {
      float fa = 0.0f, fp = 0.0f;  // the factors of a_ij and p_ij
      if (j < i0) {
        const float e = e_of(G[i] - G[i0]), d = e_of(G[i0] - G[j]);
        const float dc = cf ? d * cf[j] : d;
        fa = (sa * e) * dc;
        fp = (sp * e) * dc;
      } else if (j <= i) {
        float r = j <= anchor ? e_of(G[anchor] - G[j]) : 1.0f;
        for (int64_t t = std::max(anchor, j) + 1; t <= i; ++t) r *= e_of(G[t] - G[t - 1]);
        const float m = cf ? r * cf[j] : r;
        fa = sa * m;
        fp = sp * m;
      }
      if (a) a[i * ld + j] = j < i ? a[i * ld + j] * fa : 0.0f;
      if (p) p[i * ld + j] = j <= i ? p[i * ld + j] * fp : 0.0f;
    }
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

void kda_gate_factors_by_parts(const KernelSet& self, int64_t L, int64_t w, const float* g, float* ga, float* eg,
                               float* eg_last, float* g_last) {
  if (L <= 0) return;
  thread_local AlignedVector<double> G_buf;
  G_buf.resize(static_cast<std::size_t>(L * w));
  double* G = G_buf.data();
  self.gate_cumsum(L, w, g, G);
  const double* gl = G + (L - 1) * w;
  self.exp_f32(L * w, g, ga);
  // Each anchor, then the rows after it up to the next as running products: eg_i = eg_{i-1} o ga_i down the
  // rows, eg_last_i = eg_last_{i+1} o ga_{i+1} up them.
  for (int64_t a = 0; a < L; a += kDecayAnchorRows) {
    self.exp_diff(1, w, G + a * w, 0, nullptr, 0, eg + a * w);  // exp(G_a), an anchor
    self.chain_products(std::min(kDecayAnchorRows, L - a), w, eg + a * w, w, ga + a * w, w);
  }
  for (int64_t a = L - 1; a >= 0; a -= kDecayAnchorRows) {
    self.exp_diff(1, w, gl, 0, G + a * w, 0, eg_last + a * w);  // exp(G_last - G_a), an anchor
    self.chain_products(std::min(kDecayAnchorRows, a + 1), w, eg_last + a * w, -w, ga + (a + 1) * w, -w);
  }
  self.exp_diff(1, w, gl, 0, nullptr, 0, g_last);
}

double kda_intra_scores_simd(int64_t L, int64_t K, const float* Q, const float* Kc, const float* ga, const float* beta,
                             float* A, float* P, int64_t ld, float* scratch) {
  double flops = 0;
  const int64_t B = kIntraBlock;
  float* kl = scratch;        // [B, K]  exp(G_n - G_j) for the previous block's rows j
  float* klt = kl + B * K;    // [K, L]  column j: k_j o exp(G_n - G_j), j < n, for the current block start n
  float* e = klt + K * L;     // [B, K]  exp(G_i - G_n) for the current rows i
  float* kr = e + B * K;      // [B, K]
  float* qr = kr + B * K;     // [B, K]
  for (int64_t r0 = 0; r0 < L; r0 += B) {
    const int64_t r1 = std::min(L, r0 + B), m = r1 - r0;
    if (r0 > 0) {
      // K~^T for this block start n = r0 from the previous one's, p = n - B: the columns j < p carried over,
      // each channel times exp(G_n - G_p) (exp(G_n - G_j) = exp(G_n - G_p) exp(G_p - G_j), both <= 1, so
      // the products only shrink), and the previous block's B rows made fresh: a B-row transpose instead of
      // a transpose of all n rows for every block (measured on the 64-row chunk, K = 128: 39-43 us -> 37.5 us
      // for the whole of this function). Every factor is a running product of the step factors ga
      // (exp(G_n - G_j) = ga_{j+1} ... ga_n, exp(G_i - G_n) = ga_{n+1} ... ga_i): no exp here.
      const int64_t p0 = r0 - B;
      std::copy(ga + r0 * K, ga + (r0 + 1) * K, kl + (B - 1) * K);  // exp(G_n - G_{n-1})
      simd::chain_products(B, K, kl + (B - 1) * K, -K, ga + r0 * K, -K);  // kl_j = kl_{j+1} o ga_{p+j+1}
      if (p0 > 0) simd::scale_rows(K, p0, klt, L, kl, 1, nullptr, klt, L);  // times exp(G_n - G_p), row 0 of kl
      pack_transposed(B, K, Kc + p0 * K, K, kl, K, klt + p0, L);  // k_j o exp(G_n - G_j), transposed
      std::fill(e, e + K, 1.0f);  // exp(G_i - G_n), i = n .. r1 - 1
      simd::chain_products(m, K, e, K, ga + r0 * K, K);  // e_t = e_{t-1} o ga_{n+t}
      simd::scale_rows(m, K, Kc + r0 * K, K, e, K, nullptr, kr, K);
      simd::scale_rows(m, K, Q + r0 * K, K, e, K, nullptr, qr, K);
      simd::gemm_nn(m, r0, K, kr, K, klt, L, false, A + r0 * ld, ld);
      simd::gemm_nn(m, r0, K, qr, K, klt, L, false, P + r0 * ld, ld);
      flops += 4.0 * static_cast<double>(m) * r0 * K;
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = 0; j < r0; ++j) A[i * ld + j] *= beta[i];
      }
    }
    // Pairs inside the block: row i against rows j in [r0, i], with X[j - r0] = k_j o exp(G_i - G_j) kept
    // from row to row as X_j <- X_j o ga_i (every factor is <= 1 for non-positive gates, so the products only
    // shrink: a -1000 gate zeroes them) and X[i - r0] = k_i.
    float* X = kr;  // the off-diagonal tiles are done with kr and qr
    for (int64_t i = r0; i < r1; ++i) {
      const int64_t nj = i - r0 + 1;
      float* sa = A + i * ld + r0;
      float* sp = P + i * ld + r0;
      std::copy(Kc + i * K, Kc + (i + 1) * K, X + (nj - 1) * K);
      // (k_j o exp(G_i - G_j)) . k_i and . q_i, X stepped to row i on the way
      simd::decayed_dots2(nj, K, X, K, i > r0 ? ga + i * K : nullptr, Kc + i * K, Q + i * K, sa, sp);
      for (int64_t j = 0; j < nj; ++j) sa[j] *= beta[i];
      sa[nj - 1] = 0.0f;  // the diagonal of A is 0
      std::fill(A + i * ld + i, A + i * ld + L, 0.0f);
      std::fill(P + i * ld + i + 1, P + i * ld + L, 0.0f);
      flops += 4.0 * nj * K;
    }
  }
  return flops;
}

}  // namespace hanpu
