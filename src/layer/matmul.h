// The layer's projections: y[M, N] = x[M, Kd] W[N, Kd]^T with W as transformers stores nn.Linear weights
// ([out, in], row-major), on oneDNN's matmul (Debian's libdnnl). Measured against the engine's own tile
// GEMM on the projection shapes (`hanpu layer --compare-gemm`, README "Whole layers"): oneDNN's blocked
// kernels win there by several times, while the engine's tile GEMMs are sized for 64-row chunk tiles.
#pragma once

#include <cstdint>

#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace hanpu::layer {

// How a BF16 product runs. kNative: oneDNN's bf16 matmul. kWidened: x and W widened to fp32 (exact) block by
// block, oneDNN's fp32 matmul, y rounded once: the same products (a bf16 x bf16 product is exact in fp32) and
// fp32 accumulation, summed in another order. On CPUs without a bf16 dot product (no AVX512-BF16 or AMX:
// oneDNN emulates bf16 there with its gemm:jit kernels) the widened route is several times faster on prefill's
// row counts: `hanpu layer --compare-gemm` times both. kAuto: kWidened where oneDNN has no native bf16 ISA
// (onednn_native_bf16) and M >= kWidenMinRows, else kNative. F32 products ignore the route.
enum class Bf16Route { kAuto, kNative, kWidened };
// Below this many rows (decode's batches, short prompts) the per-call widening of all of W costs more than it
// saves, and bf16 W is half the bytes of a weight-bound product. Measured on a qwen3.5-0.8b layer's
// projections (`hanpu layer --tokens T`, 2 threads, Intel Xeon without AVX512-BF16, two rounds, widened vs
// oneDNN's bf16): T = 32 21.1 / 27.7 vs 16.7 / 13.4 ms, T = 64 27.0 / 22.3 vs 29.0 / 24.5, T = 128 34.7 / 29.3
// vs 50.0 / 49.2, T = 512 76.7 / 70.2 vs 337.4 / 231.3; one decode token 12-14 ms widened vs 1.7-2.6 bf16.
inline constexpr int64_t kWidenMinRows = 64;
// Whether oneDNN runs bf16 matmuls on a bf16 dot product here (its effective ISA is AVX512_CORE_BF16 or AMX).
bool onednn_native_bf16();

// x, W: F32, or BF16 (bf16 products, fp32 accumulation); y: F32 or BF16 (rounded once, to nearest even).
// Row strides in elements (ldx >= Kd, ldy >= N; W is dense). Runs on `threads` workers of the engine's pool,
// oneDNN single-threaded on each (layer/matmul.cpp); concurrent calls from several threads are safe.
// Primitives are cached per shape, so repeated shapes (every decode step) pay for creation once.
Status matmul_nt(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                 DType out_dtype, void* y, int64_t ldy, int threads, Bf16Route route = Bf16Route::kAuto);

}  // namespace hanpu::layer
