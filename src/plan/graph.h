// The planner's dataflow IR: one chunk of one head of GDN or KDA (DESIGN.md §1 steps #1-#6) at the
// granularity the HA-NPU paper reasons about — each GEMM with its operands and transposes, the triangular
// solve, the vector operations (exp, masks, scalings, cumsum), plus the state edge that crosses chunks.
//
// A chunk graph is a list of tensors and a list of operators in execution order (the order IS the plan's
// order: passes reorder or rewrite the list). Every operator runs on one engine class. Tensors are 2-D
// [rows, cols] fp32 here (the engine's working precision); layouts are assigned by the layout planner.
//
// The graph is typed: a tensor is a Value of the chunk algebra and an operator an OpCode with a fixed
// operand signature (check_graph verifies every operator's operands against it), so a plan computes what
// its edges say or is refused. Names exist only for reports and at the JSON boundary.
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

// The tensors of one chunk (DESIGN.md §1): inputs, the state, and every intermediate of both orders.
enum class Value {
  kQ, kK, kV, kGate, kBeta, kS,                         // inputs and the incoming state
  kG, kEG, kEGl, kEGlast, kKp, kKn, kQp, kM,            // #1: cumsum, decay factors, KDA's scaled operands, GDN's mask
  kKKt, kA, kT, kQKt, kP,                               // #2, #3 and the output's scores
  kQs, kQS, kPV, kO,                                    // #6
  kVn, kKd, kKtV, kSnew,                                // V', the update, S'
  kKe, kKS, kR,                                         // GEMM-first order
  kKb, kW, kVb, kU, kWS,                                // FLA's order
  kCount
};
const char* value_name(Value v);  // "Q", ..., "V'", "S'"
bool parse_value(const std::string& name, Value* out);

// What an operator computes (named after its output; V' has one code per order).
enum class OpCode {
  kCumsum, kExpG, kExpGl, kExpGlast, kKp, kKn, kQp, kMask,  // #1
  kKKt, kA, kSolve, kQKt, kP,                               // #2, #3, scores of #6
  kQs, kQS, kPV, kO,                                        // #6
  kKd, kKtV, kUpdate,                                       // #5's update
  kKe, kKS, kR, kVnFromTR,                                  // GEMM-first: V' = T diag(beta) (V - KS)
  kKb, kW, kVb, kU, kWS, kVnFromUWS,                        // FLA: V' = U - W S
  kCount
};
const char* op_code_name(OpCode c);  // "G", "eG", ..., "V'=TR", "V'=U-WS", "S'"
bool parse_op_code(const std::string& name, OpCode* out);

// The kernel launches a chunk's operators are split into.
enum class KernelSplit {
  kFused,     // one kernel per head (hanpu)
  kFla,       // FLA's five kernels: cumsum | kkt + solve | wy (W, U) | fwd_h (#5) | fwd_o (#6)
  kNative,    // one launch per step #1 .. #6
  kFlashQla,  // FlashQLA's: cumsum | kkt + solve | W, U and the state (#4, #5) | the output (#6)
};

struct TensorNode {
  Value value = Value::kQ;
  std::string name;  // value_name(value)
  int64_t rows = 0, cols = 0;
  int elem_bytes = 4;
  Role role = Role::kIntermediate;
  int64_t bytes() const { return rows * cols * elem_bytes; }
};

struct OpNode {
  OpCode code = OpCode::kCumsum;
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
  // What a matrix unit of br x bc blocks executes for it: every dimension padded to whole blocks (m to br,
  // n and k to bc) for a GEMM; for the solve, the b (b + 1) (b + 2) / 6 block triples (i >= k >= j) of a
  // blocked forward substitution over b = ceil(C / br) blocks, each a full br^3 block product.
  double executed_macs(int64_t br, int64_t bc) const;
};

struct Graph {
  Kind kind = Kind::kGdn;
  int64_t C = 64, K = 128, V = 128;
  std::vector<TensorNode> tensors;
  std::vector<OpNode> ops;
  int state_in = -1, state_out = -1;  // the recurrent state: S_out of chunk c is S_in of chunk c + 1

  int add_tensor(Value v, int64_t rows, int64_t cols);  // role from the value
  // An untyped tensor (value kCount), for graphs the planner's analyses run on that are not chunk graphs.
  int add_tensor(std::string name, int64_t rows, int64_t cols, Role role = Role::kIntermediate);
  // The ids of the operators reading tensor t, in order.
  std::vector<int> consumers(int t) const;
  int producer(int t) const;  // -1 for inputs and the incoming state
  double matrix_macs() const;
  // Bytes of the tensors in role r (the chunk's inputs, its output O).
  double bytes_of(Role r) const;
};

struct GraphOptions {
  bool chunk_first = true;  // #5 split into its read and its update, #6 between them, state updated in place
  bool gemm_first = true;   // K S, Q S, K K^T, Q K^T first; V' = T diag(beta) (V - diag(exp G) K S)
  KernelSplit kernels = KernelSplit::kFused;
};

// The chunk graph of `kind` for chunk size C and head dims K, V, in FLA's default order with the passes
// of `opt` applied.
Graph build_chunk_graph(Kind kind, int64_t C, int64_t K, int64_t V, const GraphOptions& opt);

// The role a value plays in a chunk graph.
Role role_of(Value v);

// Structural checks: every input of an operator is a graph input or produced by an earlier operator,
// every tensor is produced at most once, the state edge is well formed. Messages name the operator.
Status check_graph(const Graph& g);
// A chunk graph: structurally sound, every tensor a distinct typed value in its role, and every operator's
// operands and result those of its code's signature for the graph's kind. Messages name the operator
// and the operand.
Status check_chunk_graph(const Graph& g);

}  // namespace hanpu::plan
