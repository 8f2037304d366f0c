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
// fp32 accumulation, summed in another order. kInRegisters: x widened once, W widened in registers where it
// meets x (layer/bf16_weights_matmul.h): W read once as bf16, the same products, fp32 accumulation. On CPUs
// without a bf16 dot product (no AVX512-BF16 or AMX: oneDNN emulates bf16 there with its gemm:jit kernels)
// both are several times faster than oneDNN's bf16: `hanpu layer --compare-gemm` times all three. kAuto:
// kNative where oneDNN has a native bf16 ISA (onednn_native_bf16), else kWidened for M >= kWidenMinRows and
// kInRegisters below. F32 products ignore the route.
enum class Bf16Route { kAuto, kNative, kWidened, kInRegisters };
// Below this many rows (decode's batches, short prompts) widening all of W per call costs more than it saves,
// and the product is W's bytes, read once as bf16 by kInRegisters. Measured on a qwen3.5-0.8b layer's stacked
// input projection ([M, 1024] x [1024, 8224], `hanpu layer --weights bf16 --tokens M --compare-gemm`, 2 threads,
// Intel Xeon @ 2.80GHz without AVX512-BF16, two rounds; oneDNN bf16 / widened / in registers): M = 1 0.9-1.0 /
// 4.4-5.9 / 1.1-1.4 ms, M = 16 6.4-12.1 / 11.1-15.4 / 3.1-3.9 ms, M = 64 19.5-22.2 / 11.3-17.7 / 11.7-12.2 ms,
// M = 128 40.9-72.5 / 16.9-19.5 / 21.1-26.7 ms.
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
