// A test oracle for the bf16 precision mode: FLA's half-precision chunk dataflow emulated on the CPU.
// FLA's kernels (chunk_gated_delta_rule_fwd: kkt + solve, recompute_w_u, fwd_h, fwd_o) take bf16 operands
// on tensor cores with fp32 accumulation and store T, W, U, the per-chunk state h, V' and the scores P in
// the input dtype between kernels, while the state carried across chunks stays fp32. The emulation is
// chunk_forward's FLA-order computation with exactly those roundings: every GEMM operand (T, W, h, V', P,
// q, k, v) and the stored U rounded to bf16. The bf16 mode's bars (README "Precision modes") require the
// engine's final state to be no worse than this on the same inputs.
#pragma once

#include "hanpu/ops.h"

namespace hanpu {

// Outputs as for chunk_forward; options.precision is ignored (the emulation is bf16 by definition).
Status fla_bf16_emulation_forward(const Inputs& in, const Options& opt, const Outputs& out);

}  // namespace hanpu
