// The layer's vector passes around the core (layer/forward.cpp): the causal depthwise conv + SiLU over one
// tile of tokens and channels (and a decode step's conv windows as that tile's input rows), and the gated
// RMSNorm of the core's output. SIMD on the best target Highway finds at run time (AVX-512 where the CPU has
// it; the rest of the library is built for the baseline ISA), with kernels/vec_math-inl.h's exp and bf16
// rounding, and the plain loops they are tested against (tests/test_layer_kernels.cpp).
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

// One decode step's conv windows as conv_silu_tile's first taps - 1 input rows: for j < taps - 1 and c < w,
//   out[j * w + c] = x[c * ldc + (j + 1) * ldt]   (widened to fp32)
// where x holds w windows of `taps` values (a conv pool's [.., C, taps] block at its channel and tap strides,
// fp32 or bf16 bits): each window's newest taps - 1 inputs, oldest first, channel by channel in rows. On
// vectors where the windows lie back to back (ldt = 1, ldc = taps = 4). taps >= 1.
void conv_window_rows(int64_t w, int64_t taps, const void* x, int64_t ldc, int64_t ldt, bool bf16, float* out);
void conv_window_rows_reference(int64_t w, int64_t taps, const void* x, int64_t ldc, int64_t ldt, bool bf16,
                                float* out);

// The gated RMSNorm of `groups` back-to-back groups of V values of o (one token's value heads), in place, with
// gate values z in o's layout and per-channel weights w [V]. Per group, the sum in double:
//   r = 1 / sqrt(float(sum_i o_i^2 / V) + eps)
//   gdn (Qwen3NextRMSNormGated):   o_i = rnd(rnd(w_i rnd(o_i r)) silu(z_i))
//   else (KimiLinearRMSNormGated): o_i = rnd(w_i (o_i r) sigmoid(z_i))
// silu(z) = z / (1 + e^-z), sigmoid(z) = 1 / (1 + e^-z), in fp32; rnd() rounds to bf16 (nearest even) where
// o and z are bf16 bit patterns (bf16, as transformers' bf16 module rounds) and is the identity for fp32.
void gated_rms_norm(int64_t groups, int64_t V, bool gdn, float eps, const float* w, bool bf16, void* o, const void* z);
void gated_rms_norm_reference(int64_t groups, int64_t V, bool gdn, float eps, const float* w, bool bf16, void* o,
                              const void* z);

}  // namespace hanpu::layer
