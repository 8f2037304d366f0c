// The layer's causal depthwise conv + SiLU over one tile of tokens and channels, the hot loop of
// Layer::prefill (layer/forward.cpp): SIMD on the best target Highway finds at run time (AVX-512 where the
// CPU has it; the rest of the library is built for the baseline ISA), and the plain loops it is tested
// against (tests/test_layer_kernels.cpp).
#pragma once

#include <cstdint>

namespace hanpu::layer {

// For t < n and c < w:
//   a = r(bias[c] + sum_{j < taps} wts[j * ldw + c] * in[(t + j) * w + c])    (bias null: 0)
//   out[t * ldo + c] = silu(a) = a / (1 + exp(-a)), stored as fp32 or as bf16 bits (nearest even)
// where r() rounds to bf16 when round_bf16 (a bf16 conv's output) and is the identity otherwise.
// in is [taps - 1 + n, w] fp32: the taps - 1 inputs before the tile, then the tile's.
void conv_silu_tile(int64_t n, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
                    const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo);
void conv_silu_tile_reference(int64_t n, int64_t w, int64_t taps, const float* in, const float* wts, int64_t ldw,
                              const float* bias, bool round_bf16, bool out_bf16, void* out, int64_t ldo);

}  // namespace hanpu::layer
