// bf16 products for CPUs without a bf16 dot product (no AVX512-BF16 or AMX; Debian's arm64 oneDNN): the
// layer's projections in bf16. oneDNN 2.6 emulates bf16 matmuls there at a quarter of its fp32 speed, and
// widening W to fp32 per call writes and reads twice W's bytes. Here W is packed once, when the layer is
// built, in bf16 pairs along K, blocks of kPairCols output columns:
//
//   packed[(b * Kp + p) * kPairCols + c] = W[n, 2p] | W[n, 2p + 1] << 16,   n = b * kPairCols + c, Kp = ceil(Kd / 2)
//
// (zero where n >= N or 2p + 1 >= Kd). One aligned vector load then holds two K steps of consecutive columns,
// and each becomes fp32 in one instruction (a bf16 is the upper half of its fp32: the low element by a shift
// left of 16, the high one by masking the low half off), exact; each meets a broadcast x value in a fused
// multiply-add. Every output column sums its products in K order, x[m, 0] W[n, 0] first, one fused
// multiply-add a step, so a result does not depend on blocking, rows or the workers' split.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hanpu::layer {

inline constexpr int64_t kPairCols = 64;

inline int64_t bf16_pairs_depth(int64_t Kd) { return (Kd + 1) / 2; }  // Kp
// uint32 elements of a packed [N, Kd] weight.
inline std::size_t bf16_pairs_size(int64_t N, int64_t Kd) {
  return static_cast<std::size_t>((N + kPairCols - 1) / kPairCols * bf16_pairs_depth(Kd) * kPairCols);
}
// W: [N, Kd] bf16 bit patterns, row-major (transformers' [out, in]); packed: bf16_pairs_size(N, Kd) elements.
void pack_bf16_pairs(int64_t N, int64_t Kd, const uint16_t* w, uint32_t* packed);

// For m < M, n in [n0, n1):  y[m * ldy + n] = sum_{k < 2 Kp} x[m * 2 Kp + k] * W[n, k], summed in k order by
// fused multiply-adds from 0 (fp32), then y fp32, or bf16 bits rounded once (nearest even) when y_bf16.
// x: [M, 2 Kp] fp32 (bf16 values widened; x[m, Kd] = 0 where Kd is odd); n0 a multiple of kPairCols; n1 <= N
// of the packed W. 64-byte-aligned packed.
void bf16_pairs_matmul(int64_t M, int64_t n0, int64_t n1, int64_t Kp, const float* x, const uint32_t* packed,
                       bool y_bf16, void* y, int64_t ldy);
// The plain loop of the same sums (std::fma in k order): the kernel's results bit for bit.
void bf16_pairs_matmul_reference(int64_t M, int64_t n0, int64_t n1, int64_t Kp, const float* x, const uint32_t* packed,
                                 bool y_bf16, void* y, int64_t ldy);

}  // namespace hanpu::layer
