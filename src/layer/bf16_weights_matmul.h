// A bf16 product with few rows for CPUs without a bf16 dot product: decode's projections. There oneDNN 2.6
// emulates bf16 matmuls at a quarter of its fp32 speed, and widening all of W to fp32 first (the widened route,
// layer/matmul.h) writes and reads twice W's bytes per call, while a product of a few rows is bound by reading
// W once. Here each W element is widened in a register (a bf16 is an fp32 with zero low bits: exact) right
// where it meets the rows of x: W is read once, as bf16. SIMD on the best target Highway finds at run time,
// tested against the plain loop (tests/test_layer_kernels.cpp).
#pragma once

#include <cstdint>

namespace hanpu::layer {

// For m < M, n in [n0, n1):  y[m * ldy + n] = sum_{k < Kd} x[m * Kd + k] * w[n * Kd + k]
// x: [M, Kd] fp32 (dense; bf16 values widened, so every product is exact in fp32), W: [N, Kd] bf16 bit patterns
// (dense, transformers' [out, in] layout); fp32 accumulation in some order; y fp32, or bf16 bits rounded once
// (nearest even) when y_bf16.
void bf16_weights_matmul(int64_t M, int64_t n0, int64_t n1, int64_t Kd, const float* x, const uint16_t* w, bool y_bf16,
                         void* y, int64_t ldy);
void bf16_weights_matmul_reference(int64_t M, int64_t n0, int64_t n1, int64_t Kd, const float* x, const uint16_t* w,
                                   bool y_bf16, void* y, int64_t ldy);

}  // namespace hanpu::layer
