// The layer's projections: y[M, N] = x[M, Kd] W[N, Kd]^T with W as transformers stores nn.Linear weights
// ([out, in], row-major), on oneDNN's matmul (Debian's libdnnl), or, for bf16 on CPUs without a bf16 dot
// product, on hanpu's own kernel. Measured against the engine's own tile GEMM on the projection shapes (`hanpu
// layer --compare-gemm`, README "Whole layers"): oneDNN's blocked kernels win there by several times, while
// the engine's tile GEMMs are sized for 64-row chunk tiles.
#pragma once

#include <cstdint>

#include "core/aligned.h"
#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace hanpu::layer {

// How a BF16 weight is held and its products run. kNative: as given, oneDNN's bf16 matmul. kPairs: packed in
// bf16 pairs along K (layer/bf16_weights_matmul.h), hanpu's kernel on the engine's pool, x widened to fp32 a
// block of rows at a time: the same exact products (a bf16 x bf16 product is exact in fp32) and fp32
// accumulation, W read once per block of rows, as bf16. On CPUs without a bf16 dot product (no AVX512-BF16
// or AMX), where oneDNN emulates bf16 with its gemm:jit kernels, it is several times faster than oneDNN's bf16
// (`hanpu layer --compare-gemm` times both). kAuto: kNative where oneDNN has a native bf16 ISA
// (onednn_native_bf16), else kPairs. F32 weights ignore the route.
enum class Bf16Route { kAuto, kNative, kPairs };
// Whether oneDNN runs bf16 matmuls on a bf16 dot product here (its effective ISA is AVX512_CORE_BF16 or AMX).
bool onednn_native_bf16();

// A projection's weight W [N, Kd] (transformers' nn.Linear layout, [out, in] row-major), held in the form its
// products read: F32 and kNative BF16 as given, kPairs BF16 packed (the same bytes, N padded to whole 64-column blocks).
class ProjectionWeight {
 public:
  ProjectionWeight() = default;
  // w: N * Kd values of `dtype` (F32 or BF16), copied.
  static Status make(int64_t N, int64_t Kd, DType dtype, const void* w, Bf16Route route, ProjectionWeight* out);
  int64_t rows() const { return N_; }
  int64_t depth() const { return Kd_; }
  DType dtype() const { return dtype_; }
  Bf16Route route() const { return route_; }  // resolved: kNative or kPairs for BF16, kNative for F32
  const void* data() const { return data_.data(); }

 private:
  int64_t N_ = 0, Kd_ = 0;
  DType dtype_ = DType::kF32;
  Bf16Route route_ = Bf16Route::kNative;
  AlignedVector<unsigned char> data_;
};

// y[M, N] = x[M, Kd] W^T with x of W's dtype (bf16 products, fp32 accumulation for BF16), y F32 or BF16 (rounded
// once, to nearest even). Row strides in elements (ldx >= Kd, ldy >= N). Runs on `threads` workers of the
// engine's pool (oneDNN single-threaded on each, layer/matmul.cpp); concurrent calls from several threads are
// safe. oneDNN primitives are cached per shape, so repeated shapes (every decode step) pay for creation once.
Status matmul_nt(int64_t M, const void* x, int64_t ldx, const ProjectionWeight& w, DType out_dtype, void* y,
                 int64_t ldy, int threads);

}  // namespace hanpu::layer
