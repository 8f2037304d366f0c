// The planner's dataflow IR: one chunk of one head of GDN or KDA (DESIGN.md §1 steps #1-#6) at the
// granularity the HA-NPU paper reasons about — each GEMM with its operands and transposes, the triangular
// solve, the vector operations (exp, masks, scalings, cumsum), plus the state edge that crosses chunks.
//
// A chunk graph is a list of tensors and a list of operators in execution order (the order IS the plan's
// order: passes reorder or rewrite the list). Every operator runs on one engine class. Tensors are 2-D
// [rows, cols] fp32 here (the engine's working precision); layouts are assigned by the layout planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hanpu/ops.h"
#include "hanpu/status.h"

namespace hanpu::plan {

enum class Engine { kMatrix, kVector };
enum class OpKind { kGemm, kSolve, kVector };
enum class Layout { kDense, kBlocked };  // row-major vs blocked tiles (Ascend NZ fractals, HMX tiles, packed panels)
enum class Role { kInput, kIntermediate, kStateIn, kStateOut, kOutput };

const char* engine_name(Engine e);
const char* layout_name(Layout l);

struct TensorNode {
  std::string name;
  int64_t rows = 0, cols = 0;
  int elem_bytes = 4;
  Role role = Role::kIntermediate;
  int64_t bytes() const { return rows * cols * elem_bytes; }
};

struct OpNode {
  std::string name;    // what it computes, e.g. "KKt = K K^T"
  OpKind kind = OpKind::kVector;
  Engine engine = Engine::kVector;
  int step = 0;        // the DESIGN.md §1 step it belongs to (1..6)
  std::vector<int> inputs, outputs;  // tensor ids
  // GEMM: out[m, n] = op(A)[m, k] op(B)[k, n], A = inputs[0], B = inputs[1]; Solve: m = n = k = C.
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  // Vector: element operations (elements of the output times operations per element), and whether the
  // operation works along rows (cumsum, per-row scaling: slower on blocked tiles) or elementwise.
  double vector_ops = 0;
  bool row_wise = false;
  int kernel = 0;      // launch index: tensors crossing kernels are materialised in global memory

  // Multiply-accumulates on the matrix engine: m n k for a GEMM; C (C-1) (C-2) / 6 for the unit
  // lower-triangular inverse by forward substitution (row i combines the i-1 rows above it, each of
  // which has i-1-j non-zero entries left of the diagonal: sum over j < i of (i - 1 - j)).
  double macs() const;
};

struct Graph {
  Kind kind = Kind::kGdn;
  int64_t C = 64, K = 128, V = 128;
  std::vector<TensorNode> tensors;
  std::vector<OpNode> ops;
  int state_in = -1, state_out = -1;  // the recurrent state: S_out of chunk c is S_in of chunk c + 1

  int add_tensor(std::string name, int64_t rows, int64_t cols, Role role = Role::kIntermediate);
  // The ids of the operators reading tensor t, in order.
  std::vector<int> consumers(int t) const;
  int producer(int t) const;  // -1 for inputs and the incoming state
  double matrix_macs() const;
};

struct GraphOptions {
  bool chunk_first = true;  // #5 split into its read and its update, #6 between them, state updated in place
  bool gemm_first = true;   // K S, Q S, K K^T, Q K^T first; V' = T diag(beta) (V - diag(exp G) K S)
  // Kernel boundaries of a multi-kernel strategy: "fused" (one kernel per head, hanpu) or "fla"
  // (#1-#4 | #5 | #6, FLA's chunk-head-chunk launches) or "native" (one launch per step #1 .. #6).
  std::string kernels = "fused";
};

// The chunk graph of `kind` for chunk size C and head dims K, V, in FLA's default order with the passes
// of `opt` applied.
Graph build_chunk_graph(Kind kind, int64_t C, int64_t K, int64_t V, const GraphOptions& opt);

// Structural checks: every input of an operator is a graph input or produced by an earlier operator,
// every tensor is produced at most once, the state edge is well formed. Message names the operator.
Status check_graph(const Graph& g);

}  // namespace hanpu::plan
