// The native baseline as an NPU runs it: vLLM-Ascend's linear-attention path falls back to the torch-native
// chunked algorithm (transformers' torch_chunk_gated_delta_rule in modeling_qwen3_next.py; the same
// function is what sglang's NPU backend calls chunk_gated_delta_rule_native), executed eagerly, one
// torch_npu operator at a time. Every operator is its own launch over full-size tensors in global memory:
// it reads its inputs from there and writes its result back, and pays the framework's per-operator
// dispatch (SimParams::framework_op_us).
//
// The operators, in program order (C = chunk, K, V = head dims; "unit" = one value head of one chunk):
//   before the chunk loop, over every unit at once: l2norm of q and k (norm, clamp, div each), the
//   transpose-copy and fp32 cast of q, k, v, beta, g, their padding, q * scale, v * beta, k * beta, the
//   gate cumsum, the decay mask (difference, tril, exp, tril), A = -(k_beta k^T o decay) masked (matmul,
//   mul, masked_fill, neg), the triangular solve as a Python loop over rows i = 1 .. C-1 of six
//   operators each (clone row, clone block, mul, sum, add, copy back: vector work on i or i^2 elements),
//   + I (eye, add), V~ = A v_beta, k_cumdecay = A (k_beta o e^g) (exp, mul, matmul), zero state and output;
//   in the loop, once per chunk over every value head: q k^T, * decay, masked_fill, V'' = k_cumdecay S,
//   V' = V~ - V'', e^g, q o e^g, (q o e^g) S, P V', add, the output copy, e^{g_last}, S * it, g_last - g,
//   exp, k o it, (k o ...)^T V', add;
//   after it: the output's transpose-copy and cast.
// KDA runs the same sequence with the gate's operators per channel (K elements per row instead of one).
// Work per operator is counted per unit; matrix operators are batched GEMMs of the given shape per unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hanpu/ops.h"

namespace hanpu::sim {

struct FrameworkOp {
  std::string name;
  bool matrix = false;
  int64_t m = 0, n = 0, k = 0;  // matrix: the GEMM per unit
  double in_elems = 0;          // elements read per unit (fp32 in global memory)
  double out_elems = 0;         // elements written per unit; vector work is one operation per element
};

struct NativeProgram {
  std::vector<FrameworkOp> before;     // over every (value head, chunk) unit
  std::vector<FrameworkOp> per_chunk;  // once per chunk, over every value head
  std::vector<FrameworkOp> after;      // over every unit
  // Launches for a sequence of `chunks` chunks: before + chunks x per_chunk + after.
  int64_t launches(int64_t chunks) const;
};

NativeProgram native_program(Kind kind, int64_t C, int64_t K, int64_t V);

}  // namespace hanpu::sim
