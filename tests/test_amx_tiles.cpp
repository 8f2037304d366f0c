// The AMX set beside other tile users in one process (oneDNN under PyTorch configures the tiles its own way
// and may release them): every AMX entry makes sure the calling thread holds hanpu's tile configuration
// (kernels/amx_tiles.h), so a product after a foreign configuration, or after TILERELEASE, gives the bits it
// gives after hanpu's own. Skipped where the process may not run tiles.
#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/amx_support.h"
#include "kernels/kernel_set.h"

namespace hanpu {
namespace {

#if defined(__x86_64__)
// Another library's configuration: palette 1, tile 0 of 8 rows x 32 bytes, the rest unconfigured.
__attribute__((target("amx-tile"))) void load_foreign_tiles() {
  alignas(64) static uint8_t cfg[64] = {};
  cfg[0] = 1;
  cfg[16] = 32;  // colsb[0] (little-endian uint16 at byte 16)
  cfg[48] = 8;   // rows[0]
  asm volatile("" : : "r"(cfg) : "memory");
  _tile_loadconfig(cfg);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

const KernelSet* amx_set() {
  for (const KernelSet& k : kernel_sets()) {
    if (k.name == "AVX3+AMX") return &k;
  }
  return nullptr;
}
#endif

TEST(AmxTiles, ProductsAreTheSameAfterAForeignConfigurationOrARelease) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "not an x86-64 build: there are no AMX tiles";
#else
  const KernelSet* ks = amx_set();
  if (!ks) GTEST_SKIP() << "no AMX set here: " << amx_support_line(amx_support());
  const int64_t M = 40, N = 72, Kd = 96;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> A(M * Kd), B(Kd * N);
  for (float& x : A) x = nd(rng);
  for (float& x : B) x = nd(rng);
  Bf16Operand packed;
  ks->pack_bf16(Kd, N, B.data(), N, &packed);
  std::vector<float> want(M * N), after_foreign(M * N), after_release(M * N);
  ks->gemm_packed_bf16(M, N, Kd, A.data(), Kd, packed, false, want.data(), N);
  load_foreign_tiles();
  ks->gemm_packed_bf16(M, N, Kd, A.data(), Kd, packed, false, after_foreign.data(), N);
  release_tiles();
  ks->gemm_packed_bf16(M, N, Kd, A.data(), Kd, packed, false, after_release.data(), N);
  EXPECT_EQ(want, after_foreign);
  EXPECT_EQ(want, after_release);
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float x) { return x != 0.0f; }));
#endif
}

}  // namespace
}  // namespace hanpu
