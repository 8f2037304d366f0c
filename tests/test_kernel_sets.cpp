// Every kernel set of the registry (every Highway target this build compiled and this CPU runs, and the
// reference set) entry by entry against double-precision definitions and the reference set, at tile edges:
// odd sizes, column tails, unaligned pointers, leading dimensions with padding that must stay untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hanpu/ops.h"
#include "kernels/amx_support.h"
#include "kernels/bf16_round.h"
#include "kernels/decay.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "kernels/tril_inverse.h"

namespace hanpu {
namespace {

std::vector<float> randn(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// One GEMM entry against its double-precision definition; with bf16, the bf16 entry against the definition
// on operands rounded to bf16 (the precision mode's contract: rounded operands, fp32 accumulation).
void check_gemm(const KernelSet& ks, bool trans_a, bool bf16, int64_t M, int64_t N, int64_t Kd, std::mt19937_64& rng) {
  const char* target = ks.name.c_str();
  const auto op = [bf16](float x) { return static_cast<double>(bf16 ? round_bf16(x) : x); };
  const auto fn = bf16 ? (trans_a ? ks.gemm_tn_bf16 : ks.gemm_nn_bf16) : (trans_a ? ks.gemm_tn : ks.gemm_nn);
  const int64_t lda = (trans_a ? M : Kd) + 3, ldb = N + 1, ldc = N + 2;
  const int64_t a_rows = trans_a ? Kd : M;
  std::vector<float> A = randn(a_rows * lda + 1, rng), B = randn(Kd * ldb + 1, rng), C = randn(M * ldc + 1, rng);
  const std::vector<float> C0 = C;
  for (bool acc : {false, true}) {
    C = C0;
    fn(M, N, Kd, A.data() + 1, lda, B.data() + 1, ldb, acc, C.data() + 1, ldc);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double want = acc ? C0[1 + i * ldc + j] : 0.0, mag = std::fabs(want);
        for (int64_t p = 0; p < Kd; ++p) {
          const double a = op(trans_a ? A[1 + p * lda + i] : A[1 + i * lda + p]), b = op(B[1 + p * ldb + j]);
          want += a * b;
          mag += std::fabs(a * b);
        }
        ASSERT_NEAR(C[1 + i * ldc + j], want, 4e-7 * (Kd + 2) * mag)
            << target << (bf16 ? " bf16" : "") << (trans_a ? " TN " : " NN ") << M << "x" << N << "x" << Kd << " at "
            << i << "," << j;
      }
      EXPECT_EQ(C[1 + i * ldc + N], C0[1 + i * ldc + N]);  // padding untouched
    }
  }
}

// The bf16 GEMMs at the AMX set's tile and block edges (16 rows or columns a tile, 32 a block, 32 values of Kd
// a step), the chunk shapes among them, against the definition; every set runs them.
void check_tile_edges(const KernelSet& ks, std::mt19937_64& rng) {
  for (bool trans_a : {false, true}) {
    for (int64_t M : {int64_t{15}, int64_t{16}, int64_t{31}, int64_t{33}, int64_t{64}}) {
      for (int64_t N : {int64_t{16}, int64_t{32}, int64_t{47}, int64_t{128}}) {
        for (int64_t Kd : {int64_t{31}, int64_t{32}, int64_t{63}, int64_t{128}}) {
          check_gemm(ks, trans_a, true, M, N, Kd, rng);
        }
      }
    }
  }
}

// Splitting a product's columns at multiples of the set's column block leaves every column bit-identical
// (the engine's results do not depend on the thread count).
void check_column_split(const KernelSet& ks, std::mt19937_64& rng) {
  const int64_t M = 9, Kd = 37, N = 3 * ks.gemm_column_block + 5;
  const std::vector<float> A = randn(M * Kd, rng), B = randn(Kd * N, rng);
  for (auto gemm : {ks.gemm_nn, ks.gemm_nn_bf16}) {
    std::vector<float> whole(M * N), split(M * N);
    gemm(M, N, Kd, A.data(), Kd, B.data(), N, false, whole.data(), N);
    const int64_t at = ks.gemm_column_block;
    gemm(M, at, Kd, A.data(), Kd, B.data(), N, false, split.data(), N);
    gemm(M, N - at, Kd, A.data(), Kd, B.data() + at, N, false, split.data() + at, N);
    EXPECT_EQ(whole, split) << ks.name << (gemm == ks.gemm_nn ? "" : " bf16");
  }
}

// gemm_scaled_acc gives its definition's bits (scale_rows over C, then gemm_nn / gemm_tn accumulating:
// gemm_scaled_acc_by_parts on the same set) across the register blocks and a column tail, with one factor for
// every row (stride 0), one a row, and none, leaving C's padding untouched.
void check_scaled_acc(const KernelSet& ks, std::mt19937_64& rng) {
  for (bool trans_a : {false, true}) {
    for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{17}, int64_t{128}}) {
      for (int64_t N : {int64_t{5}, int64_t{53}, int64_t{128}}) {
        for (int64_t Kd : {int64_t{1}, int64_t{33}, int64_t{64}}) {
          const int64_t lda = (trans_a ? M : Kd) + 3, ldb = N + 1, ldc = N + 2;
          const std::vector<float> A = randn((trans_a ? Kd : M) * lda, rng), B = randn(Kd * ldb, rng);
          const std::vector<float> C0 = randn(M * ldc, rng), f = randn(M, rng);
          for (RowScale rs : {RowScale{}, RowScale{f.data(), 0}, RowScale{f.data(), 1}}) {
            std::vector<float> want = C0, got = C0;
            gemm_scaled_acc_by_parts(ks, trans_a, M, N, Kd, A.data(), lda, B.data(), ldb, want.data(), ldc, rs);
            ks.gemm_scaled_acc(ks, trans_a, M, N, Kd, A.data(), lda, B.data(), ldb, got.data(), ldc, rs);
            ASSERT_EQ(want, got) << ks.name << (trans_a ? " TN " : " NN ") << M << "x" << N << "x" << Kd
                                 << " row factors " << (rs.s ? (rs.stride ? "a row" : "one") : "none");
          }
        }
      }
    }
  }
}

// A packed operand gives gemm_nn_bf16's bits for every sub-product the engine takes of it: all of it, its
// leading even Kd rows (a lower-triangular product's row blocks), its leading N columns (the score blocks),
// with and without accumulation, at packed shapes with odd Kd and column tails.
void check_packed_bf16(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t Kd : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{64}, int64_t{128}}) {
    for (int64_t N : {int64_t{1}, int64_t{16}, int64_t{37}, int64_t{64}, int64_t{128}}) {
      const int64_t ldb = N + 3, M = 11, lda = Kd + 2;
      const std::vector<float> B = randn(Kd * ldb, rng), A = randn(M * lda, rng), C0 = randn(M * N, rng);
      Bf16Operand packed;
      ks.pack_bf16(Kd, N, B.data(), ldb, &packed);
      EXPECT_EQ(packed.Kd, Kd);
      EXPECT_EQ(packed.N, N);
      for (int64_t kd : {Kd, Kd / 2 * 2, int64_t{2}}) {
        for (int64_t n : {N, (N + 1) / 2}) {
          if (kd < 1 || kd > Kd) continue;
          for (bool acc : {false, true}) {
            std::vector<float> want = C0, got = C0;
            ks.gemm_nn_bf16(M, n, kd, A.data(), lda, B.data(), ldb, acc, want.data(), N);
            ks.gemm_packed_bf16(M, n, kd, A.data(), lda, packed, acc, got.data(), N);
            ASSERT_EQ(want, got) << ks.name << " packed [" << Kd << ", " << N << "], product " << M << "x" << n << "x"
                                 << kd << (acc ? " accumulated" : "");
          }
        }
      }
    }
  }
}

// gemm_packed_bf16_carrying: the product's bits are gemm_packed_bf16's whatever it carries, and the filler's
// steps run in order, each once: the set's entry carries some (a set with a matrix engine: at least one
// step on a product of several tile steps) or none (the others), and it never runs a step of a done filler.
void check_carrying(const KernelSet& ks, std::mt19937_64& rng) {
  struct Count {
    int64_t next = 0, end = 0;
    std::vector<int64_t> seen;
  };
  const auto step = [](void* c) {
    auto* k = static_cast<Count*>(c);
    k->seen.push_back(k->next++);
    return k->next < k->end;
  };
  for (int64_t M : {int64_t{1}, int64_t{17}, int64_t{32}, int64_t{45}}) {
    for (int64_t N : {int64_t{16}, int64_t{47}, int64_t{128}}) {
      for (int64_t Kd : {int64_t{31}, int64_t{128}}) {
        for (int64_t steps : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}}) {
          const int64_t lda = Kd + 1;
          const std::vector<float> A = randn(M * lda, rng), B = randn(Kd * N, rng), C0 = randn(M * N, rng);
          Bf16Operand packed;
          ks.pack_bf16(Kd, N, B.data(), N, &packed);
          for (bool acc : {false, true}) {
            std::vector<float> want = C0, got = C0;
            ks.gemm_packed_bf16(M, N, Kd, A.data(), lda, packed, acc, want.data(), N);
            Count count;
            count.end = steps;
            VectorFiller f{step, &count, steps == 0};
            ks.gemm_packed_bf16_carrying(ks, M, N, Kd, A.data(), lda, packed, acc, got.data(), N, &f);
            const std::string what = ks.name + " " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                                     std::to_string(Kd) + ", " + std::to_string(steps) + " filler steps";
            ASSERT_EQ(want, got) << what;
            for (size_t i = 0; i < count.seen.size(); ++i) ASSERT_EQ(count.seen[i], static_cast<int64_t>(i)) << what;
            EXPECT_LE(static_cast<int64_t>(count.seen.size()), steps) << what;
            EXPECT_EQ(f.done, steps == 0 || count.next == steps) << what;
            if (!ks.bf16_matrix_engine) {
              EXPECT_TRUE(count.seen.empty()) << what;
            } else if (steps > 0) {
              EXPECT_FALSE(count.seen.empty()) << what;
            }
            // The engine's wrapper (the active set's entry) finishes the filler: every step ran once.
            if (&ks != &active_kernels()) continue;
            Count rest;
            rest.end = steps;
            VectorFiller g{step, &rest, steps == 0};
            std::vector<float> again = C0;
            simd::gemm_packed_bf16_carrying(M, N, Kd, A.data(), lda, packed, acc, again.data(), N, &g);
            ASSERT_EQ(want, again) << what;
            EXPECT_EQ(rest.next, steps) << what;
            EXPECT_TRUE(g.done) << what;
          }
        }
      }
    }
  }
}

// lower_times_bf16 against the per-block form on the set's own packed product (bf16_round.h
// lower_times_bf16_by_blocks): equal values (a skipped zero product may change only a zero's sign), for
// one to three terms, lengths off the row blocks (odd, under one block), column tails, with and without
// accumulation. The left operands are lower triangular with nonzero padding beside them, which no form
// may read.
void check_lower_times_bf16(const KernelSet& ks, std::mt19937_64& rng) {
  const GemmPackedFn packed = ks.gemm_packed_bf16;
  for (int64_t L : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{37}, int64_t{64}}) {
    for (int64_t N : {int64_t{5}, int64_t{16}, int64_t{48}, int64_t{128}}) {
      const int64_t lda = L + 3, ldc = N + 2;
      std::vector<std::vector<float>> A(kMaxLowerTerms);
      std::vector<Bf16Operand> B(kMaxLowerTerms);
      std::vector<Bf16LowerTerm> t(kMaxLowerTerms);
      for (int k = 0; k < kMaxLowerTerms; ++k) {
        A[k] = randn(L * lda, rng);
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t j = i + 1; j < L; ++j) A[k][i * lda + j] = 0.0f;
        }
        const std::vector<float> X = randn(L * N, rng);
        ks.pack_bf16(L, N, X.data(), N, &B[k]);
        t[k] = {A[k].data(), lda, &B[k]};
      }
      const std::vector<float> C0 = randn(L * ldc, rng);
      for (int nt = 1; nt <= kMaxLowerTerms; ++nt) {
        for (bool acc : {false, true}) {
          std::vector<float> want = C0, got = C0;
          for (int64_t r0 = 0; r0 < L; r0 += kTrilBlock) {
            const int64_t r1 = std::min(L, r0 + kTrilBlock);
            for (int k = 0; k < nt; ++k) {
              packed(r1 - r0, N, r1, t[k].A + r0 * lda, lda, *t[k].B, acc || k > 0, want.data() + r0 * ldc, ldc);
            }
          }
          ks.lower_times_bf16(L, N, nt, t.data(), acc, got.data(), ldc);
          for (std::size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(want[i], got[i]) << ks.name << " L " << L << " N " << N << " terms " << nt
                                       << (acc ? " accumulated" : "") << " at " << i;
          }
        }
      }
    }
  }
}

// The fused bf16 entries (residual_split_bf16_rows, lower_times_split_bf16) against their definitions, the
// set's own entries composed (kernels/fused_bf16.cpp), word for word: row counts off the tiles and blocks
// (odd M: a last pair's missing row), column tails, the row-block lengths of lower products, padded
// operands (Kd off whole tile steps) and raw rows read in place; the outputs start as garbage of another
// shape, which every word must overwrite.
void check_fused_bf16(const KernelSet& ks, std::mt19937_64& rng) {
  const auto same = [](const Bf16Operand& a, const Bf16Operand& b) {
    return a.Kd == b.Kd && a.N == b.N && a.ld == b.ld && a.data.size() == b.data.size() &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
  };
  const auto garbage = [&](Bf16Operand* o) {
    o->reshape(3, 3, 16, 4096);
    for (float& v : o->data) v = randn(1, rng)[0];
  };
  std::vector<uint16_t> kb;
  for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}, int64_t{64}}) {
    for (int64_t N : {int64_t{5}, int64_t{16}, int64_t{48}, int64_t{128}}) {
      for (int64_t Kd : {int64_t{31}, int64_t{128}}) {
        const int64_t lda = Kd + 5;
        const std::vector<float> a = randn(M * lda, rng), Bsrc = randn(Kd * N, rng), V = randn(M * N, rng);
        const std::vector<float> s = randn(M, rng), beta = randn(M, rng);
        kb.resize(static_cast<std::size_t>(M * lda));
        ks.f32_to_bf16(M * lda, a.data(), kb.data());
        Bf16Operand B, hi, lo, want_hi, want_lo;
        ks.pack_bf16(Kd, N, Bsrc.data(), N, &B);
        garbage(&hi);
        garbage(&lo);
        for (const float* sf : {s.data(), static_cast<const float*>(nullptr)}) {  // row factors, or none (KDA)
          residual_split_bf16_rows_by_parts(ks, M, N, Kd, kb.data(), lda, B, sf, beta.data(), V.data(), &want_hi,
                                            &want_lo);
          ks.residual_split_bf16_rows(ks, M, N, Kd, kb.data(), lda, B, sf, beta.data(), V.data(), &hi, &lo);
          const std::string at = ks.name + " residual M " + std::to_string(M) + " N " + std::to_string(N) + " Kd " +
                                 std::to_string(Kd) + (sf ? "" : " without row factors");
          ASSERT_TRUE(same(hi, want_hi)) << at << " hi";
          ASSERT_TRUE(same(lo, want_lo)) << at << " lo";
        }
      }
      // V' = T R: T lower triangular (nonzero padding beside it), R split; the update's factors.
      const int64_t L = M, ldt = L + 3;
      std::vector<float> T = randn(L * ldt, rng);
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = i + 1; j < L; ++j) T[i * ldt + j] = 0.0f;
      }
      const std::vector<float> R = randn(L * N, rng), e = randn(L, rng), f = randn(L, rng);
      Bf16Operand rh, rl;
      ks.pack_bf16_split(L, N, R.data(), N, &rh, &rl);
      const Bf16LowerTerm terms[2] = {{T.data(), ldt, &rh}, {T.data(), ldt, &rl}};
      for (int nt = 1; nt <= 2; ++nt) {
        for (const float* rowscale : {static_cast<const float*>(nullptr), f.data()}) {
          Bf16Operand hi, lo, sc, want_hi, want_lo, want_sc;
          garbage(&hi);
          garbage(&lo);
          garbage(&sc);
          lower_times_split_bf16_by_parts(ks, L, N, nt, terms, &want_hi, &want_lo, e.data(), rowscale, &want_sc);
          ks.lower_times_split_bf16(ks, L, N, nt, terms, &hi, &lo, e.data(), rowscale, &sc);
          const std::string at = ks.name + " L " + std::to_string(L) + " N " + std::to_string(N) + " terms " +
                                 std::to_string(nt) + (rowscale ? " with rowscale" : "");
          ASSERT_TRUE(same(hi, want_hi)) << at << " hi";
          ASSERT_TRUE(same(lo, want_lo)) << at << " lo";
          ASSERT_TRUE(same(sc, want_sc)) << at << " scaled";
        }
        Bf16Operand hi, lo, want_hi, want_lo;  // the split alone (KDA: no scaled copy)
        garbage(&hi);
        garbage(&lo);
        lower_times_split_bf16_by_parts(ks, L, N, nt, terms, &want_hi, &want_lo, nullptr, nullptr, nullptr);
        ks.lower_times_split_bf16(ks, L, N, nt, terms, &hi, &lo, nullptr, nullptr, nullptr);
        ASSERT_TRUE(same(hi, want_hi)) << ks.name << " split alone, hi, terms " << nt;
        ASSERT_TRUE(same(lo, want_lo)) << ks.name << " split alone, lo, terms " << nt;
      }
    }
  }
}

// gemm_terms_bf16 against its definition (kernels/fused_bf16.cpp), value for value, for one to three terms,
// A read as stored or transposed, with and without accumulation and row factors (one for all rows, or per
// row), at sizes off the tiles; and its one-term transposed form against gemm_tn_bf16 on B's source (the
// engine's dense update layout gives the packed layout's bits).
void check_gemm_terms_bf16(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t M : {int64_t{1}, int64_t{17}, int64_t{128}}) {
    for (int64_t N : {int64_t{5}, int64_t{48}, int64_t{128}}) {
      for (int64_t Kd : {int64_t{7}, int64_t{64}}) {
        std::vector<Bf16Operand> B(kMaxLowerTerms);
        std::vector<std::vector<float>> src(kMaxLowerTerms);
        const Bf16Operand* b[kMaxLowerTerms];
        for (int k = 0; k < kMaxLowerTerms; ++k) {
          src[k] = randn(Kd * N, rng);
          ks.pack_bf16(Kd, N, src[k].data(), N, &B[k]);
          b[k] = &B[k];
        }
        const std::vector<float> s = randn(M, rng);
        const int64_t ldc = N + 1;
        const std::vector<float> C0 = randn(M * ldc, rng);
        for (bool trans_a : {false, true}) {
          const int64_t lda = (trans_a ? M : Kd) + 2;
          const std::vector<float> A = randn((trans_a ? Kd : M) * lda, rng);
          for (int nt = 1; nt <= kMaxLowerTerms; ++nt) {
            for (bool acc : {false, true}) {
              for (int64_t stride : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
                const RowScale rs = stride < 0 ? RowScale{} : RowScale{s.data(), stride};
                std::vector<float> want = C0, got = C0;
                gemm_terms_bf16_by_parts(ks, M, N, Kd, A.data(), lda, trans_a, nt, b, acc, want.data(), ldc, rs);
                ks.gemm_terms_bf16(ks, M, N, Kd, A.data(), lda, trans_a, nt, b, acc, got.data(), ldc, rs);
                for (std::size_t i = 0; i < want.size(); ++i) {
                  ASSERT_EQ(want[i], got[i]) << ks.name << " M " << M << " N " << N << " Kd " << Kd << " terms " << nt
                                             << (trans_a ? " A^T" : "") << (acc ? " accumulated" : "") << " factors "
                                             << stride << " at " << i;
                }
              }
            }
          }
          if (!trans_a) continue;
          std::vector<float> want = C0, got = C0;
          ks.gemm_tn_bf16(M, N, Kd, A.data(), lda, src[0].data(), N, true, want.data(), ldc);
          ks.gemm_terms_bf16(ks, M, N, Kd, A.data(), lda, true, 1, b, true, got.data(), ldc, RowScale{});
          for (std::size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(want[i], got[i]) << ks.name << " against gemm_tn_bf16, M " << M << " N " << N << " Kd " << Kd
                                       << " at " << i;
          }
        }
      }
    }
  }
}

// The row conversions bit for bit against the element-wise definitions (hanpu/tensor.h), on values that
// exercise the rounding: ties both ways, carries into the exponent, overflow to infinity, subnormals,
// signed zeros, infinities and NaNs (quiet and signalling), at lengths with vector tails.
void check_bf16_conversions(const KernelSet& ks, std::mt19937_64& rng) {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3F7FFFFFu,
                                0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u,
                                0x7FC00000u, 0x7F800001u, 0xFFBFFFFFu, 0x00018000u};
  std::uniform_int_distribution<uint32_t> any;
  while (bits.size() < 77) bits.push_back(any(rng));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, bits.size()}) {
    std::vector<uint16_t> got(n + 1, 0xABCD);
    ks.f32_to_bf16(static_cast<int64_t>(n), x.data(), got.data());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], f32_to_bf16_bits(x[i])) << ks.name << " narrowing 0x" << std::hex << bits[i];
    }
    EXPECT_EQ(got[n], 0xABCD) << ks.name << ": wrote past the row";
    std::vector<float> back(n + 1, 7.0f);
    ks.bf16_to_f32(static_cast<int64_t>(n), got.data(), back.data());
    for (std::size_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, &back[i], 4);
      ASSERT_EQ(b, static_cast<uint32_t>(got[i]) << 16) << ks.name << " widening";
    }
    EXPECT_EQ(back[n], 7.0f) << ks.name << ": wrote past the row";
  }
  // The rows forms: the same words row by row at the rows' strides, nothing between the rows written.
  for (int64_t cols : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{40}}) {
    const int64_t rows = static_cast<int64_t>(bits.size()) / cols, lds = cols + 3, ldd = cols + 2;
    std::vector<float> src(rows * lds, 0.0f);
    for (int64_t r = 0; r < rows; ++r) std::copy(x.begin() + r * cols, x.begin() + (r + 1) * cols, src.begin() + r * lds);
    std::vector<uint16_t> narrow(rows * ldd, 0xABCD);
    ks.f32_to_bf16_rows(rows, cols, src.data(), lds, narrow.data(), ldd);
    std::vector<float> wide(rows * lds, 7.0f);
    ks.bf16_to_f32_rows(rows, cols, narrow.data(), ldd, wide.data(), lds);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < ldd; ++c) {
        const uint16_t want = c < cols ? f32_to_bf16_bits(src[r * lds + c]) : 0xABCD;
        ASSERT_EQ(narrow[r * ldd + c], want) << ks.name << " rows narrowing at " << r << "," << c;
      }
      for (int64_t c = 0; c < lds; ++c) {
        uint32_t b;
        std::memcpy(&b, &wide[r * lds + c], 4);
        if (c < cols) {
          ASSERT_EQ(b, static_cast<uint32_t>(narrow[r * ldd + c]) << 16) << ks.name << " rows widening";
        } else {
          ASSERT_EQ(wide[r * lds + c], 7.0f) << ks.name << " rows widening wrote past a row";
        }
      }
    }
  }
}

// The decay mask of a chunk (simd.h decay_mask) against exp(G_i - G_j) in double: exact zeros above the
// diagonal (a from column i, p beyond it), elsewhere within the rounding of its float exponents, exp's ulps and
// at most three products; and bit for bit against its definition entry by entry with the set's own exp_f32,
// with and without column and row factors, a or p alone, at lengths around the 16-row blocks, anchors and vector
// widths, a row stride past L (left untouched), gate cumsums down to about -190 (subnormal results: absolute
// tolerance below the smallest normal float).
void check_decay_mask(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> gate(-3.0, 0.0);
  ks.decay_mask(0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1);  // an empty chunk: nothing to touch
  for (int64_t L : {int64_t{1}, int64_t{5}, int64_t{7}, int64_t{16}, int64_t{17}, int64_t{25}, int64_t{33},
                    int64_t{64}}) {
    const int64_t ld = L + 3;
    std::vector<double> G(L);
    double g = 0;
    for (double& x : G) x = (g += gate(rng));
    const std::vector<float> cf = randn(L, rng), ra = randn(L, rng), rp = randn(L, rng);
    const std::vector<float> a0 = randn(L * ld, rng), p0 = randn(L * ld, rng);
    for (bool factors : {false, true}) {
      std::vector<float> a = a0, p = p0;
      const float *c = factors ? cf.data() : nullptr, *sa = factors ? ra.data() : nullptr,
                  *sp = factors ? rp.data() : nullptr;
      ks.decay_mask(L, G.data(), c, sa, sp, a.data(), p.data(), ld);
      std::vector<float> bits_a = a0, bits_p = p0;  // the definition's factors and order, this set's exps
      decay_mask_by_entries(ks.exp_f32, L, G.data(), c, sa, sp, bits_a.data(), bits_p.data(), ld);
      for (int64_t i = 0; i < L; ++i) {
        const float fa = factors ? ra[i] : 1.0f, fp = factors ? rp[i] : 1.0f;
        for (int64_t j = 0; j < L; ++j) {
          const std::string at = " row " + std::to_string(i) + " col " + std::to_string(j) + " of " + std::to_string(L);
          const double m = std::exp(G[i] - G[j]) * (factors ? cf[j] : 1.0);
          const double wa = j < i ? a0[i * ld + j] * fa * m : 0.0, wp = j <= i ? p0[i * ld + j] * fp * m : 0.0;
          const double rel = 2e-6 + 2.5e-7 * std::fabs(G[i] - G[j]);
          ASSERT_NEAR(a[i * ld + j], wa, rel * std::fabs(wa) + 1e-37) << ks.name << " a," << at;
          ASSERT_NEAR(p[i * ld + j], wp, rel * std::fabs(wp) + 1e-37) << ks.name << " p," << at;
          ASSERT_EQ(a[i * ld + j], bits_a[i * ld + j]) << ks.name << " a bits," << at;
          ASSERT_EQ(p[i * ld + j], bits_p[i * ld + j]) << ks.name << " p bits," << at;
        }
        for (int64_t j = L; j < ld; ++j) {
          ASSERT_EQ(a[i * ld + j], a0[i * ld + j]) << ks.name << ": wrote past row " << i;
          ASSERT_EQ(p[i * ld + j], p0[i * ld + j]) << ks.name << ": wrote past row " << i;
        }
      }
      std::vector<float> only_a = a0, only_p = p0;  // one of them not formed: the same other
      ks.decay_mask(L, G.data(), c, sa, sp, only_a.data(), nullptr, ld);
      ks.decay_mask(L, G.data(), c, sa, sp, nullptr, only_p.data(), ld);
      EXPECT_EQ(only_a, a) << ks.name;
      EXPECT_EQ(only_p, p) << ks.name;
    }
  }
}

// The bf16-rows forms against the float forms on the widened operands, bit for bit: B = X^T packed from bf16
// rows, A given as bf16 rows, at even and odd Kd, odd row strides, an A that is not 4-byte aligned, partial and
// whole tiles of rows; with row factors (RowScale) against the packed product and a separate pass of them
// (bf16_round.h with_row_scale).
void check_bf16_rows(const KernelSet& ks, std::mt19937_64& rng) {
  const auto to_bits = [](const std::vector<float>& x) {
    std::vector<uint16_t> b(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) b[i] = f32_to_bf16_bits(x[i]);
    return b;
  };
  for (int64_t Kd : {int64_t{1}, int64_t{16}, int64_t{33}, int64_t{128}}) {
    for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{64}}) {
      for (int64_t lda : {Kd, Kd + 1}) {
        for (int64_t M : {int64_t{9}, int64_t{32}}) {  // 32: whole tiles, read in place by the AMX set at Kd 128
          const int64_t ldx = lda == Kd ? Kd + Kd % 2 : Kd + 3;  // even (rows are words) or odd strides
          const std::vector<uint16_t> X = to_bits(randn(N * ldx, rng)), A = to_bits(randn(M * lda + 1, rng));
          // the float forms' operands: B [Kd, N] = X^T widened, A widened
          std::vector<float> Bt(Kd * N), Af(M * lda + 1);
          for (int64_t kd = 0; kd < Kd; ++kd) {
            for (int64_t n = 0; n < N; ++n) Bt[kd * N + n] = bf16_bits_to_f32(X[n * ldx + kd]);
          }
          for (std::size_t i = 0; i < Af.size(); ++i) Af[i] = bf16_bits_to_f32(A[i]);
          Bf16Operand from_floats, from_rows;
          ks.pack_bf16(Kd, N, Bt.data(), N, &from_floats);
          ks.pack_bf16_rows_t(N, Kd, X.data(), ldx, &from_rows);
          EXPECT_EQ(from_rows.Kd, Kd);
          EXPECT_EQ(from_rows.N, N);
          const std::vector<float> factors = randn(M, rng);
          for (int64_t a0 : {int64_t{0}, int64_t{1}}) {  // a0 = 1: A starts at an odd bf16 offset
            // row factors: none, one for all rows (stride 0), one a row; on the prior C or on the products
            for (RowScale rs : {RowScale{}, RowScale{factors.data(), 0}, RowScale{factors.data(), 1}}) {
              for (bool acc : {false, true}) {
                std::vector<float> want(M * N, 1.25f), got(M * N, 1.25f);
                with_row_scale(rs, acc, M, N, want.data(), N, [&] {
                  ks.gemm_packed_bf16(M, N, Kd, Af.data() + a0, lda, from_floats, acc, want.data(), N);
                });
                ks.gemm_bf16_rows(M, N, Kd, A.data() + a0, lda, from_rows, acc, got.data(), N, rs);
                ASSERT_EQ(want, got) << ks.name << " bf16 rows " << M << "x" << N << "x" << Kd << " lda " << lda
                                     << " at " << a0 << (acc ? " acc" : "") << " row factors stride "
                                     << (rs.s ? rs.stride : -1);
              }
            }
          }
        }
      }
    }
  }
}

// scale_rows_bf16 against its definition: gemm_bf16_rows on its rows gives the bits of gemm_packed_bf16 on
// scale_rows' fp32 output, with per-element (sw = cols), per-row (sw = 1) and one (sw = 0) factors, column
// tails, row strides past cols, and factors that push products into the subnormal range (where the AVX512-BF16
// sets' rounding differs from f32_to_bf16's); away from it the rows are f32_to_bf16 of the products.
void check_scale_rows_bf16(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t cols : {int64_t{5}, int64_t{16}, int64_t{31}, int64_t{33}, int64_t{48}, int64_t{128}}) {
    for (int64_t sw : {int64_t{0}, int64_t{1}, cols}) {
      const int64_t rows = 19, lds = cols + 3, ldd = cols + cols % 2, N = 24;
      const std::vector<float> src = randn(rows * lds, rng);
      std::vector<float> scale = randn(rows * std::max<int64_t>(sw, 1), rng);
      for (std::size_t i = 0; i < scale.size(); i += 7) scale[i] *= 1e-38f;  // subnormal products
      std::vector<uint16_t> got(rows * ldd + 1, 0xABCD);
      ks.scale_rows_bf16(ks, rows, cols, src.data(), lds, scale.data(), sw, got.data(), ldd);
      std::vector<float> x(rows * cols);
      ks.scale_rows(rows, cols, src.data(), lds, scale.data(), sw, nullptr, x.data(), cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const float v = x[r * cols + c];
          if (std::fabs(v) >= std::numeric_limits<float>::min()) {
            ASSERT_EQ(got[r * ldd + c], f32_to_bf16_bits(v)) << ks.name << " row " << r << " col " << c;
          }
        }
        for (int64_t c = cols; c < ldd; ++c) ASSERT_EQ(got[r * ldd + c], 0xABCD) << ks.name << ": wrote past a row";
      }
      const std::vector<float> B = randn(cols * N, rng);
      Bf16Operand packed;
      ks.pack_bf16(cols, N, B.data(), N, &packed);
      std::vector<float> want(rows * N), have(rows * N);
      ks.gemm_packed_bf16(rows, N, cols, x.data(), cols, packed, false, want.data(), N);
      ks.gemm_bf16_rows(rows, N, cols, got.data(), ldd, packed, false, have.data(), N, RowScale{});
      ASSERT_EQ(want, have) << ks.name << " products of scale_rows_bf16's rows, cols " << cols << " sw " << sw;
    }
  }
}

// gemm_bf16_rows_tn against gemm_tn_bf16 on the widened rows, term after term, bit for bit: M at and past the
// 16-column panel edges, even and odd Kd (the last pair's high half), an odd row stride and rows at an odd bf16
// offset, one to three terms, accumulating or not, with and without row factors.
void check_bf16_rows_tn(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t M : {int64_t{1}, int64_t{9}, int64_t{16}, int64_t{33}, int64_t{128}}) {
    for (int64_t Kd : {int64_t{1}, int64_t{16}, int64_t{33}, int64_t{64}}) {
      for (int64_t ldx : {M, M + 3}) {
        const int64_t N = 17, x0 = ldx == M ? 0 : 1;
        std::vector<uint16_t> X(Kd * ldx + 1);
        std::vector<float> Xf(X.size());
        const std::vector<float> x = randn(X.size(), rng);
        for (std::size_t i = 0; i < X.size(); ++i) {
          X[i] = f32_to_bf16_bits(x[i]);
          Xf[i] = bf16_bits_to_f32(X[i]);
        }
        std::vector<float> B[kMaxLowerTerms];
        Bf16Operand packed[kMaxLowerTerms];
        const Bf16Operand* terms[kMaxLowerTerms];
        for (int t = 0; t < kMaxLowerTerms; ++t) {
          B[t] = randn(Kd * N, rng);
          ks.pack_bf16(Kd, N, B[t].data(), N, &packed[t]);
          terms[t] = &packed[t];
        }
        const std::vector<float> factors = randn(M, rng);
        for (int nt = 1; nt <= kMaxLowerTerms; ++nt) {
          for (RowScale rs : {RowScale{}, RowScale{factors.data(), 0}, RowScale{factors.data(), 1}}) {
            for (bool acc : {false, true}) {
              std::vector<float> want(M * N, 1.5f), got(M * N, 1.5f);
              with_row_scale(rs, acc, M, N, want.data(), N, [&] {
                for (int t = 0; t < nt; ++t) {
                  ks.gemm_tn_bf16(M, N, Kd, Xf.data() + x0, ldx, B[t].data(), N, acc || t > 0, want.data(), N);
                }
              });
              ks.gemm_bf16_rows_tn(M, N, Kd, X.data() + x0, ldx, nt, terms, acc, got.data(), N, rs);
              ASSERT_EQ(want, got) << ks.name << " bf16 rows^T " << M << "x" << N << "x" << Kd << " ldx " << ldx
                                   << ", " << nt << " terms" << (acc ? " acc" : "") << " row factors stride "
                                   << (rs.s ? rs.stride : -1);
            }
          }
        }
      }
    }
  }
}

// Decay factors from cumsums against the double definition: row strides of 0 (one row repeated) and a
// null subtrahend, column tails, differences down to underflow.
void check_exp_diff(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-120.0, 0.0);
  for (int64_t cols : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}}) {
    const int64_t rows = 5;
    std::vector<double> Ga(rows * cols), Gb(rows * cols);
    for (double& x : Ga) x = u(rng);
    for (double& x : Gb) x = u(rng) / 4;
    for (int64_t sa : {int64_t{0}, cols}) {
      for (bool sub : {false, true}) {
        std::vector<float> out(rows * cols + 1, 5.0f);
        ks.exp_diff(rows, cols, Ga.data(), sa, sub ? Gb.data() : nullptr, cols, out.data());
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t d = 0; d < cols; ++d) {
            const double x = static_cast<float>(Ga[r * sa + d] - (sub ? Gb[r * cols + d] : 0.0));
            const double want = std::exp(x);
            ASSERT_NEAR(out[r * cols + d], want, 1e-6 * want + 1e-37) << ks.name << " exp_diff " << r << "," << d;
          }
        }
        EXPECT_EQ(out[rows * cols], 5.0f) << ks.name << ": wrote past the rows";
      }
    }
  }
}

// The transposed panel, exactly src * factor per element (unscaled, per-column (sw 0), per-row and per-element
// factors), at 4 x 4 tile edges, with the padding between dst rows untouched.
void check_pack_transposed(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{9}, int64_t{16}, int64_t{35}, int64_t{64}}) {
    for (int64_t cols : {int64_t{1}, int64_t{4}, int64_t{7}, int64_t{16}, int64_t{37}, int64_t{130}}) {
      for (int64_t sw : {int64_t{-1}, int64_t{0}, int64_t{1}, cols}) {
        const int64_t lds = cols + 3, ldd = rows + 2;
        const std::vector<float> src = randn(rows * lds, rng), scale = randn(rows * cols, rng);
        const float* sc = sw < 0 ? nullptr : scale.data();
        std::vector<float> dst(cols * ldd, 7.0f);
        ks.pack_transposed(rows, cols, src.data(), lds, sc, sw, dst.data(), ldd);
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t r = 0; r < ldd; ++r) {
            const float want = r >= rows ? 7.0f : src[r * lds + c] * (sc ? sc[r * sw + (sw == 1 ? 0 : c)] : 1.0f);
            ASSERT_EQ(dst[c * ldd + r], want)
                << ks.name << " " << rows << "x" << cols << " sw " << sw << " at " << c << "," << r;
          }
        }
      }
    }
  }
}

// The portable bf16 GEMMs' operand rounding, bit for bit round_bf16 (the reference set's loop) at vector
// tails and row strides: values at many scales, exact bf16 values, ties both ways (to even: down from an
// even upper half, up from an odd one), -0, subnormals, infinities, values that round to infinity, quiet
// and signalling NaNs (kept NaN, quieted, with their sign and upper payload); the padding stays untouched.
void check_round_bf16_rows(const KernelSet& ks, std::mt19937_64& rng) {
  const auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  const std::vector<float> edges = {round_bf16(1.3f),  bits(0x3F808000u), bits(0x3F818000u), -0.0f,
                                    bits(0x00008000u), bits(0x80018000u), bits(0x00000001u), INFINITY,
                                    -INFINITY,         bits(0x7F7FFFFFu), bits(0xFF7F8000u), bits(0x7FC01234u),
                                    bits(0x7F800001u), bits(0xFF812345u)};
  for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{130}}) {
    const int64_t rows = 3, lds = cols + 1, ldd = cols + 2;
    std::vector<float> x = randn(rows * lds, rng);
    std::uniform_int_distribution<int> ex(-60, 60);
    for (float& v : x) v = std::ldexp(v, ex(rng));
    for (std::size_t i = 0; i < edges.size(); ++i) x[(i * 5) % x.size()] = edges[i];
    std::vector<float> got(rows * ldd, 7.0f);
    ks.round_bf16_rows(rows, cols, x.data(), lds, got.data(), ldd);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < ldd; ++c) {
        if (c >= cols) {
          ASSERT_EQ(got[r * ldd + c], 7.0f) << ks.name << " padding at " << r << "," << c;
          continue;
        }
        const float want = round_bf16(x[r * lds + c]);
        uint32_t gu, wu;
        std::memcpy(&gu, &got[r * ldd + c], 4);
        std::memcpy(&wu, &want, 4);
        ASSERT_EQ(gu, wu) << ks.name << " cols " << cols << " at " << r << "," << c << " x " << x[r * lds + c];
      }
    }
  }
  EXPECT_EQ(round_bf16(bits(0x3F808000u)), bits(0x3F800000u));  // the tie from an even upper half: down
  EXPECT_EQ(round_bf16(bits(0x3F818000u)), bits(0x3F820000u));  // from an odd one: up
}

// The low term of the two-term bf16 split, bit for bit x - round_bf16(x) (so hi + lo == x exactly, and lo is
// within half a bf16 ulp of x), at vector tails, on values at many scales, exact bf16 values (lo = 0) and
// ties; non-finite x gives a non-finite lo; the padding between rows stays untouched.
void check_bf16_residual(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{130}}) {
    const int64_t rows = 3, ldx = cols + 1, ldl = cols + 2;
    std::vector<float> x = randn(rows * ldx, rng);
    std::uniform_int_distribution<int> ex(-60, 60);
    for (float& v : x) v = std::ldexp(v, ex(rng));
    x[0] = round_bf16(x[0]);                                               // exact: lo = 0
    if (cols > 1) x[1] = bf16_bits_to_f32(0x3F81) + std::ldexp(1.0f, -8);  // a tie: rounds to even
    if (cols > 2) x[2] = INFINITY;
    if (cols > 3) x[3] = NAN;
    std::vector<float> lo(rows * ldl, 7.0f);
    ks.bf16_residual(rows, cols, x.data(), ldx, lo.data(), ldl);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < ldl; ++c) {
        const float got = lo[r * ldl + c];
        if (c >= cols) {
          ASSERT_EQ(got, 7.0f) << ks.name << " padding at " << r << "," << c;
          continue;
        }
        const float xv = x[r * ldx + c], want = xv - round_bf16(xv);
        if (!std::isfinite(xv)) {
          ASSERT_FALSE(std::isfinite(got)) << ks.name << " " << xv;
          continue;
        }
        ASSERT_EQ(got, want) << ks.name << " cols " << cols << " at " << r << "," << c << " x " << xv;
        ASSERT_EQ(round_bf16(xv) + got, xv) << ks.name;
        ASSERT_LE(std::fabs(got), std::fabs(xv) * std::ldexp(1.0f, -8)) << ks.name;
      }
    }
  }
}

// pack_bf16_split against its definition, word for word: pack_bf16 of X and of bf16_residual(X), at odd Kd
// (a last pair's missing row) and column tails, on ties, -0, subnormals (of X and of its low term),
// infinities, values that round to infinity and NaNs.
void check_pack_bf16_split(const KernelSet& ks, std::mt19937_64& rng) {
  const auto same = [](const Bf16Operand& a, const Bf16Operand& b) {
    return a.Kd == b.Kd && a.N == b.N && a.ld == b.ld && a.data.size() == b.data.size() &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
  };
  for (int64_t Kd : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}}) {
    for (int64_t N : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{33}, int64_t{128}}) {
      const int64_t ldx = N + 3;
      std::vector<float> x = randn(Kd * ldx, rng);
      std::uniform_int_distribution<int> ex(-40, 40);
      for (float& v : x) v = std::ldexp(v, ex(rng));
      const float specials[] = {bf16_bits_to_f32(0x3F81) + std::ldexp(1.0f, -8),
                                -0.0f,
                                std::ldexp(1.0f, -140),
                                std::ldexp(1.0f, -120) * 1.00390625f,
                                INFINITY,
                                -INFINITY,
                                std::numeric_limits<float>::max(),
                                NAN};
      for (std::size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[(i * 5) % x.size()] = specials[i];
      Bf16Operand hi, lo, want_hi, want_lo;
      std::vector<float> low(Kd * N);
      ks.bf16_residual(Kd, N, x.data(), ldx, low.data(), N);
      ks.pack_bf16(Kd, N, x.data(), ldx, &want_hi);
      ks.pack_bf16(Kd, N, low.data(), N, &want_lo);
      ks.pack_bf16_split(Kd, N, x.data(), ldx, &hi, &lo);
      EXPECT_TRUE(same(hi, want_hi)) << ks.name << " split pack hi " << Kd << "x" << N;
      EXPECT_TRUE(same(lo, want_lo)) << ks.name << " split pack lo " << Kd << "x" << N;
    }
  }
}

// The diagonal blocks' forward substitution, bit for bit the reference loop's (kernels/tril_inverse.h) block
// by block, at every block size up to kTrilBlock (vector tails, one row, none) and for several blocks with a
// partial last one (the sets run full blocks side by side), on entries at many scales, with signed zeros (a
// -1000 gate's masked score is -0 for a negative k.k) and an infinite entry (non-finite where the loop's
// result is); (I + A) T = I to fp32 accuracy within each block; nothing of T outside the blocks' lower parts
// (their upper parts, the rest of T, row padding) written.
void check_tril_diagonal_blocks(const KernelSet& ks, std::mt19937_64& rng) {
  const auto bits = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
  };
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= kTrilBlock; ++n) sizes.push_back(n);
  for (int64_t n : {int64_t{17}, int64_t{31}, int64_t{32}, int64_t{48}, int64_t{63}, int64_t{64}, int64_t{80}, int64_t{81}}) {
    sizes.push_back(n);
  }
  for (int64_t n : sizes) {
    for (int variant = 0; variant < 3; ++variant) {
      const int64_t lda = n + 3, ldt = n + 2;
      std::vector<float> A = randn(n * lda + 1, rng);
      std::uniform_int_distribution<int> ex(-3, 1);
      for (float& v : A) v = std::ldexp(v, ex(rng)) * 0.25f;
      if (variant == 1) {  // signed zeros: whole sums of zeros, and zeros among nonzero terms
        for (std::size_t k = 0; k < A.size(); k += 2) A[k] = (k / 2) % 2 ? -0.0f : 0.0f;
      }
      if (variant == 2 && n > 2) A[(n - 1) * lda + 1 + (n - 1) / kTrilBlock * kTrilBlock] = INFINITY;
      std::vector<float> want(n * ldt + 1, 7.0f), got = want;
      for (int64_t i0 = 0; i0 < n; i0 += kTrilBlock) {
        tril_block_inverse(std::min(kTrilBlock, n - i0), A.data() + i0 * lda + i0, lda, want.data() + i0 * ldt + i0,
                           ldt);
      }
      ks.tril_diagonal_blocks(n, A.data(), lda, got.data(), ldt);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t b0 = i / kTrilBlock * kTrilBlock;  // the first column of row i's diagonal block
        for (int64_t j = 0; j < ldt; ++j) {
          const float w = want[i * ldt + j], g = got[i * ldt + j];
          if (j > i || j < b0) {
            ASSERT_EQ(bits(g), bits(7.0f)) << ks.name << " n " << n << " wrote outside the blocks at " << i << "," << j;
          } else if (!std::isfinite(w)) {
            ASSERT_FALSE(std::isfinite(g)) << ks.name << " n " << n << " at " << i << "," << j;
          } else {
            ASSERT_EQ(bits(g), bits(w)) << ks.name << " n " << n << " variant " << variant << " at " << i << "," << j
                                        << ": " << g << " vs " << w;
          }
        }
      }
      if (variant == 2) continue;
      for (int64_t i = 0; i < n; ++i) {  // (I + A) T = I on each block's lower part
        const int64_t b0 = i / kTrilBlock * kTrilBlock;
        for (int64_t j = b0; j <= i; ++j) {
          double s = got[i * ldt + j], mag = std::fabs(s);
          for (int64_t r = j; r < i; ++r) {
            s += static_cast<double>(A[i * lda + r]) * got[r * ldt + j];
            mag += std::fabs(static_cast<double>(A[i * lda + r]) * got[r * ldt + j]);
          }
          ASSERT_NEAR(s, i == j ? 1.0 : 0.0, 1e-6 * (mag + 1)) << ks.name << " n " << n << " at " << i << "," << j;
        }
      }
    }
  }
}

// A chunk's gate cumsums, bit for bit the scalar loop's (kernels/decay.h) at vector tails (w = 1 is GDN's
// scalar gate, 128 KDA's channels), with -1000 gates, signed zeros and an infinite gate among them.
void check_gate_cumsum(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> gate(-0.5f, 0.0f);
  std::uniform_int_distribution<int> pick(0, 40);
  for (int64_t w : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{17}, int64_t{128}}) {
    for (int64_t L : {int64_t{1}, int64_t{5}, int64_t{64}}) {
      std::vector<float> g(L * w);
      for (float& x : g) {
        const int k = pick(rng);
        x = k == 0 ? -1000.0f : k == 1 ? -0.0f : k == 2 ? 0.0f : gate(rng);
      }
      if (L * w > 7) g[7] = -INFINITY;
      std::vector<double> want(L * w + 1, 5.0), got = want;
      gate_cumsum(L, w, g.data(), want.data());
      ks.gate_cumsum(L, w, g.data(), got.data());
      for (int64_t i = 0; i <= L * w; ++i) {
        uint64_t a, b;
        std::memcpy(&a, &want[i], sizeof a);
        std::memcpy(&b, &got[i], sizeof b);
        ASSERT_EQ(b, a) << ks.name << " w " << w << " L " << L << " at " << i << ": " << got[i] << " vs " << want[i];
      }
    }
  }
}

// Rows' sums of squares side by side, bit for bit each row summed alone, at vector tails and
// row counts around the four-row block, with the padding between rows ignored.
void check_sum_squares_rows(const KernelSet& ks, std::mt19937_64& rng) {
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{128}, int64_t{131}}) {
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{9}}) {
      const int64_t ldx = n + 3;
      const std::vector<float> x = randn(rows * ldx, rng);
      std::vector<double> got(rows + 1, -1.0);
      ks.sum_squares_rows(rows, n, x.data(), ldx, got.data());
      for (int64_t r = 0; r < rows; ++r) {
        double want;
        ks.sum_squares_rows(1, n, x.data() + r * ldx, n, &want);  // the row alone
        uint64_t a, b;
        std::memcpy(&a, &want, sizeof a);
        std::memcpy(&b, &got[r], sizeof b);
        ASSERT_EQ(b, a) << ks.name << " n " << n << " rows " << rows << " row " << r;
      }
      EXPECT_EQ(got[rows], -1.0) << ks.name << ": wrote past the rows";
      // bf16 rows: the sums of their widened values, bit for bit (and nothing past the rows).
      std::vector<uint16_t> xb(rows * ldx);
      std::vector<float> widened(rows * ldx);
      for (std::size_t i = 0; i < xb.size(); ++i) {
        xb[i] = f32_to_bf16_bits(x[i]);
        widened[i] = bf16_bits_to_f32(xb[i]);
      }
      std::vector<double> want(rows), got_b(rows + 1, -1.0);
      ks.sum_squares_rows(rows, n, widened.data(), ldx, want.data());
      ks.sum_squares_rows_bf16(rows, n, xb.data(), ldx, got_b.data());
      for (int64_t r = 0; r < rows; ++r) {
        uint64_t a, b;
        std::memcpy(&a, &want[r], sizeof a);
        std::memcpy(&b, &got_b[r], sizeof b);
        ASSERT_EQ(b, a) << ks.name << " bf16 n " << n << " rows " << rows << " row " << r;
      }
      EXPECT_EQ(got_b[rows], -1.0) << ks.name << ": the bf16 form wrote past the rows";
    }
  }
}

void check_vector_kernels(const KernelSet& ks, std::mt19937_64& rng) {
  const char* name = ks.name.c_str();
  const int64_t cb = ks.gemm_column_block;
  // exp over the range the engine uses (exponents <= 0, down to underflow), and a little above 0
  std::vector<float> x, y;
  for (float v = -100.0f; v <= 5.0f; v += 0.37f) x.push_back(v);
  y.resize(x.size());
  ks.exp_f32(static_cast<int64_t>(x.size()), x.data(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    EXPECT_NEAR(y[i], want, 4e-7 * want + 1e-38) << name << " exp(" << x[i] << ")";
    // one element alone (the 1-lane tail) gives the vector lane's bits: the decay masks and factors rely on it
    float alone = 0;
    ks.exp_f32(1, &x[i], &alone);
    EXPECT_EQ(std::bit_cast<uint32_t>(alone), std::bit_cast<uint32_t>(y[i])) << name << " exp(" << x[i] << ") alone";
  }
  // past the range: 0 below -104, infinity above ln(FLT_MAX) ~ 88.72
  const std::vector<float> edge = {-1000.0f, -104.5f, 88.8f, 100.0f, 1000.0f};
  std::vector<float> ey(edge.size());
  ks.exp_f32(static_cast<int64_t>(edge.size()), edge.data(), ey.data());
  EXPECT_EQ(ey[0], 0.0f) << name;
  EXPECT_EQ(ey[1], 0.0f) << name;
  for (std::size_t i = 2; i < edge.size(); ++i) EXPECT_EQ(ey[i], INFINITY) << name << " exp(" << edge[i] << ")";
  // row scaling (all three scale widths, with and without a row factor), residual, sum of squares
  const int64_t rows = 7, cols = 2 * cb + 3;
  std::vector<float> src = randn(rows * cols, rng), sc = randn(rows * cols, rng), rs = randn(rows, rng);
  for (int64_t sw : {int64_t{0}, int64_t{1}, cols}) {
    for (const float* rowscale : {static_cast<const float*>(nullptr), static_cast<const float*>(rs.data())}) {
      std::vector<float> dst(rows * cols);
      ks.scale_rows(rows, cols, src.data(), cols, sc.data(), sw, rowscale, dst.data(), cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double want =
              static_cast<double>(src[r * cols + c]) * sc[r * sw + (sw > 1 ? c : 0)] * (rowscale ? rowscale[r] : 1.0f);
          EXPECT_NEAR(dst[r * cols + c], want, 1e-6 * (1 + std::fabs(want))) << name << " sw=" << sw;
        }
      }
    }
  }
  std::vector<float> out(rows * cols);
  ks.beta_residual(rows, cols, rs.data(), src.data(), sc.data(), out.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double want = static_cast<double>(rs[i / cols]) * (src[i] - sc[i]);
    EXPECT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(want))) << name;
  }
  double ss = 0;
  for (float v : src) ss += static_cast<double>(v) * v;
  double got_ss;
  ks.sum_squares_rows(1, rows * cols, src.data(), rows * cols, &got_ss);
  EXPECT_NEAR(got_ss, ss, 1e-6 * ss) << name;
}

// One row of a KDA diagonal block's pairs: the rows stepped exactly (X_j r per element for j < rows - 1, the
// last row and everything beyond cols untouched; no step without r), and both dots of the stepped rows against
// the double definition, at vector tails and at every size of the last group of four rows.
void check_decayed_dots2(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (bool step : {true, false}) {
    for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{128}, int64_t{131}}) {
      for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{7}, int64_t{16}}) {
        const int64_t ldx = cols + 3;
        std::vector<float> r(cols);
        for (float& v : r) v = unit(rng);
        const std::vector<float> X0 = randn(rows * ldx, rng), a = randn(cols, rng), b = randn(cols, rng);
        std::vector<float> X = X0, oa(rows), ob(rows);
        ks.decayed_dots2(rows, cols, X.data(), ldx, step ? r.data() : nullptr, a.data(), b.data(), oa.data(),
                         ob.data());
        for (int64_t j = 0; j < rows; ++j) {
          double wa = 0, wb = 0, mag = 0;
          for (int64_t c = 0; c < ldx; ++c) {
            const float x0 = X0[j * ldx + c];
            const float want = c < cols && step && j < rows - 1 ? x0 * r[c] : x0;
            ASSERT_EQ(X[j * ldx + c], want) << ks.name << " X at " << j << "," << c << " cols " << cols;
            if (c >= cols) continue;
            wa += static_cast<double>(want) * a[c];
            wb += static_cast<double>(want) * b[c];
            mag += std::fabs(want) * (std::fabs(a[c]) + std::fabs(b[c]));
          }
          EXPECT_NEAR(oa[j], wa, 4e-7 * (cols + 2) * mag) << ks.name << " cols=" << cols << " rows=" << rows;
          EXPECT_NEAR(ob[j], wb, 4e-7 * (cols + 2) * mag) << ks.name << " cols=" << cols << " rows=" << rows;
        }
      }
    }
  }
}

// KDA's gate factors: every set's entry bit for bit its own entries composed (kda_gate_factors_by_parts), at
// chunk lengths around the anchor spacing and channel counts around the vector width, with -1000 gates
// (factors that underflow to 0), zero gates of both signs, and padding after each output left alone.
void check_kda_gate_factors(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> gate(-3.0f, 0.0f);
  std::uniform_int_distribution<int> pick(0, 40);
  for (int64_t w : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{17}, int64_t{128}, int64_t{133}}) {
    for (int64_t L : {int64_t{1}, int64_t{2}, kDecayAnchorRows, kDecayAnchorRows + 1, int64_t{33}, int64_t{64}}) {
      std::vector<float> g(L * w);
      for (float& x : g) {
        const int k = pick(rng);
        x = k == 0 ? -1000.0f : k == 1 ? -0.0f : k == 2 ? 0.0f : gate(rng);
      }
      // [ga | eg | eg_last] rows, then g_last, each with one padding value after it
      const int64_t n = L * w + 1;
      std::vector<float> got(3 * n + w + 1, 7.0f), want = got;
      const auto run = [&](bool fused, std::vector<float>& out) {
        float* o = out.data();
        (fused ? ks.kda_gate_factors : kda_gate_factors_by_parts)(ks, L, w, g.data(), o, o + n, o + 2 * n, o + 3 * n);
      };
      run(true, got);
      run(false, want);
      for (std::size_t i = 0; i < got.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &want[i], sizeof a);
        std::memcpy(&b, &got[i], sizeof b);
        ASSERT_EQ(b, a) << ks.name << " w " << w << " L " << L << " at " << i << ": " << got[i] << " vs " << want[i];
      }
      for (int64_t part = 0; part < 3; ++part) ASSERT_EQ(got[part * n + n - 1], 7.0f) << ks.name << " padding";
      ASSERT_EQ(got.back(), 7.0f) << ks.name << " padding after g_last";
    }
  }
}

// Running products of rows: every set's bits are the reference set's (one multiply an element, in row
// order), down and up the rows (negative strides), at vector tails, nothing else written.
void check_chain_products(const KernelSet& ks, std::mt19937_64& rng) {
  const KernelSet& ref = reference_kernel_set();
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (bool up : {false, true}) {
    for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{64}, int64_t{65}, int64_t{131}}) {
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{16}}) {
        const int64_t ld = cols + 3;
        std::vector<float> out0(n * ld), f(n * ld);
        for (float& v : out0) v = unit(rng);
        for (float& v : f) v = unit(rng);
        std::vector<float> got = out0, want = out0;
        // up: the chain starts at the last row and runs to row 0
        const int64_t first = up ? (n - 1) * ld : 0, step = up ? -ld : ld;
        ks.chain_products(n, cols, got.data() + first, step, f.data() + first, step);
        ref.chain_products(n, cols, want.data() + first, step, f.data() + first, step);
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t c = 0; c < ld; ++c) {
            const int64_t at = r * ld + c;
            ASSERT_EQ(got[at], want[at]) << ks.name << " n=" << n << " cols=" << cols << " up=" << up;
            const int64_t chain_row = up ? n - 1 - r : r;
            if (c >= cols || chain_row == 0) {
              ASSERT_EQ(got[at], out0[at]) << ks.name << " wrote outside the chain";
            }
          }
        }
        if (n > 1 && cols > 0) {  // and the reference is the definition
          const int64_t r1 = up ? n - 2 : 1, r0 = up ? n - 1 : 0;
          EXPECT_EQ(want[r1 * ld], out0[r0 * ld] * f[r1 * ld]);
        }
      }
    }
  }
}

// bf16 rows widened and scaled: every set's bits are the definition's two multiplies after an exact widening
// (so the reference set's), at vector tails, with a row stride, nothing past cols written.
void check_bf16_rows_scaled(const KernelSet& ks, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(0.25f, 4.0f);
  for (int64_t cols : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{128}, int64_t{131}}) {
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{64}}) {
      const int64_t lds = cols + 5, ldd = cols + 2;
      const std::vector<float> x = randn(rows * lds, rng);
      std::vector<uint16_t> src(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) src[i] = f32_to_bf16_bits(x[i]);
      std::vector<float> f(rows);
      for (float& v : f) v = unit(rng);
      const float s = unit(rng);
      std::vector<float> got(rows * ldd, 7.0f);
      ks.bf16_rows_scaled(rows, cols, src.data(), lds, f.data(), s, got.data(), ldd);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < ldd; ++c) {
          const float want = c < cols ? (bf16_bits_to_f32(src[r * lds + c]) * f[r]) * s : 7.0f;
          ASSERT_EQ(got[r * ldd + c], want) << ks.name << " rows " << rows << " cols " << cols << " at " << r << "," << c;
        }
      }
    }
  }
}

// One decode token against the reference set, both state layouts, at tile edges (V around the kernels'
// 1- and 4-vector tiles, odd K), with the state's row padding untouched.
void check_decode(const KernelSet& ks, std::mt19937_64& rng) {
  const KernelSet& ref = reference_kernel_set();
  for (bool v_first : {false, true}) {
    for (int64_t K : {int64_t{1}, int64_t{7}, int64_t{64}}) {
      for (int64_t V : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{65}, int64_t{130}}) {
        const int64_t rows = v_first ? V : K, cols = v_first ? K : V, lds = cols + 2;
        std::vector<float> S = randn(rows * lds, rng), q = randn(K, rng), k = randn(K, rng), v = randn(V, rng);
        std::vector<float> decay(K);
        for (float& d : decay) d = std::exp(-std::fabs(randn(1, rng)[0]));
        std::vector<float> S_ref = S, o(V), o_ref(V);
        (v_first ? ks.decode_v_first : ks.decode_k_first)(K, V, S.data(), lds, decay.data(), q.data(), k.data(),
                                                          v.data(), 0.7f, o.data());
        (v_first ? ref.decode_v_first : ref.decode_k_first)(K, V, S_ref.data(), lds, decay.data(), q.data(), k.data(),
                                                            v.data(), 0.7f, o_ref.data());
        const std::string at =
            ks.name + (v_first ? " v-first" : " k-first") + " K=" + std::to_string(K) + " V=" + std::to_string(V);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < lds; ++c) {
            const float want = S_ref[r * lds + c];
            if (c >= cols) {
              EXPECT_EQ(S[r * lds + c], want) << at << ": padding written";
            } else {
              EXPECT_NEAR(S[r * lds + c], want, 2e-5 * (K + 1) * (1 + std::fabs(want))) << at;
            }
          }
        }
        for (int64_t c = 0; c < V; ++c) EXPECT_NEAR(o[c], o_ref[c], 2e-5 * (K + 1) * (1 + std::fabs(o_ref[c]))) << at;
      }
    }
  }
}

TEST(KernelSets, TheRegistryListsTheBestFirstAndTheReferenceLast) {
  const std::vector<KernelSet>& sets = kernel_sets();
  ASSERT_GE(sets.size(), 2u);  // at least one compiled target and the reference
  EXPECT_EQ(sets.back().name, "reference");
  EXPECT_EQ(&reference_kernel_set(), &sets.back());
  if (!std::getenv("HANPU_KERNELS")) {
    EXPECT_EQ(&active_kernels(), &sets.front());
  }
  for (const KernelSet& ks : sets) {
    EXPECT_GE(ks.gemm_column_block, 1) << ks.name;
    EXPECT_GT(ks.fma_peak(10), 0) << ks.name;
    EXPECT_FALSE(ks.bf16_unit.empty()) << ks.name;
    if (ks.bf16_peak) {
      EXPECT_GT(ks.bf16_peak(10), 0) << ks.name;
    }
  }
}

// Precision auto runs bf16 inputs in the bf16 mode exactly where the active set's bf16 GEMMs have a unit
// faster than its fp32 FMA (the AMX and AVX512-BF16 sets), and every other input in exact mode; explicit
// modes stay as given. The portable sets are the ones whose bf16 GEMMs are the fp32 GEMM on rounded copies.
TEST(KernelSets, AutoPrecisionTakesBf16OnlyWhereTheBf16UnitBeatsTheFma) {
  const KernelSet& ks = active_kernels();
  const bool fast_unit = ks.bf16_peak != nullptr;  // AMX tiles or VDPBF16PS, not the fp32 FMA
  EXPECT_EQ(ks.bf16_gemms_beat_fp32(), fast_unit) << ks.name;
  EXPECT_EQ(resolve_precision(Precision::kAuto, DType::kBF16), fast_unit ? Precision::kBf16 : Precision::kExact)
      << ks.name << ": " << ks.bf16_unit;
  for (DType d : {DType::kF32, DType::kF16}) {
    EXPECT_EQ(resolve_precision(Precision::kAuto, d), Precision::kExact) << dtype_name(d);
  }
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_EQ(resolve_precision(Precision::kExact, d), Precision::kExact) << dtype_name(d);
    EXPECT_EQ(resolve_precision(Precision::kBf16, d), Precision::kBf16) << dtype_name(d);
  }
  for (const KernelSet& k : kernel_sets()) {
    EXPECT_EQ(k.bf16_gemms_beat_fp32(), k.bf16_peak != nullptr) << k.name;
  }
}

// The AVX512-BF16 set exists exactly where the CPU has the instruction: ahead of the plain AVX3 set on AMD's
// cores, whose dot products outrun the FMA, right behind it on others (Intel's issue them at half the FMA's
// rate, so AVX3's bf16 mode is the faster one there).
TEST(KernelSets, Avx512Bf16SetWhereTheCpuHasIt) {
#if !defined(__x86_64__) && !defined(__i386__)
  GTEST_SKIP() << "not an x86 build: there is no AVX512-BF16 set";
#else
  __builtin_cpu_init();
  const std::vector<KernelSet>& sets = kernel_sets();
  const bool has_avx3 = std::any_of(sets.begin(), sets.end(), [](const KernelSet& k) { return k.name == "AVX3"; });
  if (!__builtin_cpu_supports("avx512bf16") || !has_avx3) {
    GTEST_SKIP() << "this CPU has no AVX512-BF16 (or no AVX3 set): the bf16 GEMMs run on rounded fp32 operands";
  }
  const auto at = [&](const char* name) {
    return std::find_if(sets.begin(), sets.end(), [&](const KernelSet& k) { return k.name == name; }) - sets.begin();
  };
  ASSERT_LT(at("AVX3+BF16"), static_cast<std::ptrdiff_t>(sets.size()));
  const KernelSet& bf16 = sets[static_cast<std::size_t>(at("AVX3+BF16"))];
  if (__builtin_cpu_is("amd")) {
    // first, or second behind the AMX set that copies it
    EXPECT_EQ(at("AVX3+BF16"), sets.front().name == "AVX3+AMX" ? 1 : 0);
  } else {
    EXPECT_EQ(at("AVX3+BF16"), at("AVX3") + 1);
    // without AMX tiles the engine's bf16 GEMMs then run on AVX3's rounded fp32 operands
    if (!amx_support().usable && !std::getenv("HANPU_KERNELS")) {
      EXPECT_EQ(active_kernels().name, "AVX3");
    }
  }
  EXPECT_EQ(bf16.bf16_unit, "AVX512-BF16 dot products");
  EXPECT_NE(bf16.bf16_peak, nullptr);
  EXPECT_FALSE(bf16.bf16_matrix_engine);
#endif
}

// The AMX set exists exactly where this process may run tiles (and the AVX512-BF16 set it builds on exists),
// first of all, its bf16 unit a matrix engine beside the vector unit.
TEST(KernelSets, AmxSetWhereTilesAreUsable) {
  const std::vector<KernelSet>& sets = kernel_sets();
  const bool has_bf16 = std::any_of(sets.begin(), sets.end(), [](const KernelSet& k) { return k.name == "AVX3+BF16"; });
  const bool has_amx = std::any_of(sets.begin(), sets.end(), [](const KernelSet& k) { return k.name == "AVX3+AMX"; });
  if (!amx_support().usable) {
    EXPECT_FALSE(has_amx);
    GTEST_SKIP() << "no AMX set on this machine: " << amx_support_line(amx_support());
  }
  EXPECT_EQ(has_amx, has_bf16);
  if (!has_amx) GTEST_SKIP() << "AMX tiles are usable but this CPU has no AVX512-BF16 set to build on";
  EXPECT_EQ(sets.front().name, "AVX3+AMX");
  EXPECT_EQ(sets.front().bf16_unit, "AMX tiles (TDPBF16PS)");
  EXPECT_TRUE(sets.front().bf16_matrix_engine);
  EXPECT_NE(sets.front().bf16_peak, nullptr);
}

// The AMX check names the first condition that fails: the instructions (CPUID), the OS's tile state
// (OSXSAVE, XCR0 bits 17 and 18), the kernel's permission (arch_prctl); usable only when all hold.
TEST(AmxSupport, NamesTheFirstFailedCondition) {
  AmxProbe p;
  EXPECT_NE(decide_amx_support(p).reason.find("no AMX-TILE or AMX-BF16"), std::string::npos);
  p.cpu_tile = true;
  EXPECT_NE(decide_amx_support(p).reason.find("no AMX-BF16"), std::string::npos);
  p.cpu_bf16 = true;
  EXPECT_NE(decide_amx_support(p).reason.find("OSXSAVE"), std::string::npos);
  p.osxsave = true;
  p.xcr0 = 0xE7;  // x87, SSE, AVX, AVX-512 state: no tiles
  EXPECT_NE(decide_amx_support(p).reason.find("XCR0 bit 17, XTILECFG"), std::string::npos);
  p.xcr0 |= uint64_t{1} << 17;
  EXPECT_NE(decide_amx_support(p).reason.find("XCR0 bit 18, XTILEDATA"), std::string::npos);
  p.xcr0 |= uint64_t{1} << 18;
  p.perm_requested = true;
  p.perm_rc = -1;
  p.perm_errno = EINVAL;
  const AmxSupport refused = decide_amx_support(p);
  EXPECT_FALSE(refused.usable);
  EXPECT_NE(refused.reason.find("ARCH_REQ_XCOMP_PERM"), std::string::npos) << refused.reason;
  EXPECT_NE(refused.reason.find(std::strerror(EINVAL)), std::string::npos) << refused.reason;
  p.perm_rc = 0;
  p.perm_errno = 0;
  const AmxSupport ok = decide_amx_support(p);
  EXPECT_TRUE(ok.usable);
  EXPECT_TRUE(ok.reason.empty());
}

// On this machine: without both amx_tile and amx_bf16 among /proc/cpuinfo's flags AMX is not usable, and
// the reason says the CPU lacks them; with them, usable or refused by the OS, never "the CPU lacks".
TEST(AmxSupport, AgreesWithTheCpuFlagsOfThisMachine) {
#if !defined(__x86_64__)
  // (under qemu-user /proc/cpuinfo is the x86 host's, which says nothing of this build's CPU)
  GTEST_SKIP() << "not an x86-64 build: there are no AMX tiles";
#endif
  std::ifstream f("/proc/cpuinfo");
  if (!f) GTEST_SKIP() << "no /proc/cpuinfo to compare with";
  std::string line, flags;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  const bool listed = flags.find(" amx_tile ") != std::string::npos && flags.find(" amx_bf16 ") != std::string::npos;
  const AmxSupport& s = amx_support();
  EXPECT_EQ(s.usable, s.reason.empty());
  if (!listed) {
    EXPECT_FALSE(s.usable);
    EXPECT_NE(s.reason.find("the CPU reports no"), std::string::npos) << s.reason;
  } else {
    EXPECT_EQ(s.reason.find("the CPU reports no"), std::string::npos) << s.reason;
  }
}

TEST(KernelSets, EveryEntryOfEverySetMatchesItsDefinition) {
  for (const KernelSet& ks : kernel_sets()) {
    std::mt19937_64 rng(std::hash<std::string>()(ks.name));
    const int64_t cb = ks.gemm_column_block;
    // M and N cross the Highway sets' register blocks (kernels/simd.cc: 6 or 8 rows, then 4, then single rows;
    // 4, 3, 2 and 1 vectors of columns, then a column tail).
    for (bool trans_a : {false, true}) {
      for (int64_t M : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{17}}) {
        for (int64_t N : {int64_t{1}, int64_t{7}, cb - 1, cb, cb + 1, 3 * cb / 2 + 5, 2 * cb + cb / 2 + 3}) {
          if (N < 1) continue;
          for (int64_t Kd : {int64_t{1}, int64_t{2}, int64_t{16}, int64_t{33}, int64_t{64}}) {
            for (bool bf16 : {false, true}) check_gemm(ks, trans_a, bf16, M, N, Kd, rng);
          }
        }
      }
    }
    check_column_split(ks, rng);
    check_scaled_acc(ks, rng);
    check_tile_edges(ks, rng);
    check_packed_bf16(ks, rng);
    check_carrying(ks, rng);
    check_lower_times_bf16(ks, rng);
    check_fused_bf16(ks, rng);
    check_gemm_terms_bf16(ks, rng);
    check_bf16_rows(ks, rng);
    check_bf16_rows_tn(ks, rng);
    check_scale_rows_bf16(ks, rng);
    check_bf16_conversions(ks, rng);
    check_decay_mask(ks, rng);
    check_exp_diff(ks, rng);
    check_pack_transposed(ks, rng);
    check_bf16_residual(ks, rng);
    check_pack_bf16_split(ks, rng);
    check_round_bf16_rows(ks, rng);
    check_tril_diagonal_blocks(ks, rng);
    check_gate_cumsum(ks, rng);
    check_kda_gate_factors(ks, rng);
    check_sum_squares_rows(ks, rng);
    check_vector_kernels(ks, rng);
    check_decayed_dots2(ks, rng);
    check_chain_products(ks, rng);
    check_bf16_rows_scaled(ks, rng);
    check_decode(ks, rng);
  }
}

}  // namespace
}  // namespace hanpu
