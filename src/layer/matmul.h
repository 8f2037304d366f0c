// The layer's projections: y[M, N] = x[M, Kd] W[N, Kd]^T with W as transformers stores nn.Linear weights
// ([out, in], row-major), on oneDNN's matmul (Debian's libdnnl). Measured against the engine's own tile
// GEMM on the projection shapes (`hanpu layer --gemm-check`, README "The layer"): oneDNN's blocked kernels
// win there by several times, while the engine's tile GEMMs are sized for 64-row chunk tiles.
#pragma once

#include <cstdint>

#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace hanpu::layer {

// x, W: F32, or BF16 (bf16 products, fp32 accumulation); y: F32 or BF16 (rounded once, to nearest even).
// Row strides in elements (ldx >= Kd, ldy >= N; W is dense). Runs on `threads` OpenMP threads.
// Primitives are cached per shape, so repeated shapes (every decode step) pay for creation once.
Status matmul_nt(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                 DType out_dtype, void* y, int64_t ldy, int threads);

}  // namespace hanpu::layer
