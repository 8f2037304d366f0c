// Dataflow-aware layout planning (HA-NPU paper §6) over a chunk graph.
//
// Decision variables: the layout each operator computes in (dense or blocked) and the layout the
// recurrent state is kept in between chunks. An operator reads every input in its own layout and
// writes its outputs in it. A tensor stored in one layout and read in the other is transformed once
// (the copy is shared by every later reader that wants that layout); graph inputs arrive dense; S' is
// transformed back to the state layout at the chunk end if it was produced in the other one.
// Cost of a plan = sum of operator costs in their layouts + sum of transform costs (cycles).
//
// The dynamic programme walks the operators in order; its state is the set of layouts each live tensor
// is available in (only tensors with readers ahead, so the state stays small). Graph outputs are
// delivered dense (transformed at the chunk end if produced blocked). Three prunings
// (paper §6):
//  (i)   chunk decoupling: only the state crosses chunks, so one chunk is solved per state layout and the
//        best of the two is kept — the cost of N_c chunks is N_c times that, linear in the chunk count;
//  (ii)  matrix anchors: a tensor whose remaining readers are all operators with a single allowed layout
//        (the matrix unit mandating blocked operands) has a fixed future cost: it is settled at once and
//        leaves the DP state, so branches into matrix operators add no state;
//  (iii) vector chains: consecutive shape-preserving vector operators linked by single-reader tensors,
//        each with one variable-layout input (its others are graph inputs), are one DP step with two
//        candidates, all dense or all blocked. Exact when vector operators are never faster on blocked
//        tiles and a transform's cost depends only on the tensor's size (the paper's premises; the device
//        cost model satisfies both) — the argument is in layout.cpp.
// The exhaustive search (branch and bound over every operator's layout, no prunings) is the oracle.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "plan/device.h"
#include "plan/graph.h"

namespace hanpu::plan {

// Cycles of operators in a layout and of layout transforms. Shared with the NPU model.
class CostModel {
 public:
  virtual ~CostModel() = default;
  // False when the hardware cannot run op in that layout (e.g. a Cube GEMM on dense operands).
  virtual bool allowed(const Graph& g, int op, Layout l) const = 0;
  virtual double op_cost(const Graph& g, int op, Layout l) const = 0;
  virtual double transform_cost(const Graph& g, int tensor, Layout from, Layout to) const = 0;
  // Whether op, run in a layout, needs input `tensor` in that layout (default: every input). A matrix unit
  // that converts its left operand on the way in needs only the right one (the host in bf16 mode).
  virtual bool reads_in_layout(const Graph& /*g*/, int /*op*/, int /*tensor*/) const { return true; }
  // The layout op's results are stored in when it runs in l (default l; the host's GEMMs write fp32 rows).
  virtual Layout result_layout(const Graph& /*g*/, int /*op*/, Layout l) const { return l; }
};

// x rounded up to whole blocks (a unit that works in tiles executes the padding too).
inline int64_t padded(int64_t x, int64_t block) { return (x + block - 1) / block * block; }

// The analytic model of a device description: GEMM cycles = padded MACs / MACs per cycle (x the dense
// penalty for a GEMM with a transposed operand run dense, where dense is allowed), the solve's at the solve
// rate where the device gives one; vector cycles = bytes touched / vector bytes per cycle (x the blocked
// penalty for row-wise operations), plus the chunk rows' load and store where the device gives their rates,
// and none for the state update's decay where the device's GEMM scales C's rows on their way in
// (Device::matrix_scales_accumulator); transform cycles = fixed + 2 x padded bytes / transform rate.
class DeviceCostModel : public CostModel {
 public:
  explicit DeviceCostModel(const Device& d) : d_(d) {}
  bool allowed(const Graph& g, int op, Layout l) const override;
  double op_cost(const Graph& g, int op, Layout l) const override;
  double transform_cost(const Graph& g, int tensor, Layout from, Layout to) const override;

 private:
  // The host's chunk rows (Device::rows_*): the input rows' load with the gate cumsum, the output rows' store
  // with O; the same in every layout, so they move estimates, never the plan.
  double rows_cost(const Graph& g, const OpNode& o) const;
  const Device& d_;
};

struct Transform {
  int tensor = -1;
  Layout from = Layout::kDense, to = Layout::kDense;
  int before_op = -1;  // -1: at the chunk end (the state, back to its layout)
  double cost = 0;
};

struct LayoutPlan {
  std::vector<Layout> op_layout;
  Layout state_layout = Layout::kDense;
  std::vector<Transform> transforms;
  double cost = std::numeric_limits<double>::infinity();
  int64_t dp_states = 0;  // DP states visited (the search effort), 0 for fixed plans
};

// The cost of a complete assignment, with its transforms (infinity if an operator's layout is not allowed).
LayoutPlan evaluate_plan(const Graph& g, const CostModel& cm, const std::vector<Layout>& op_layout,
                         Layout state_layout);

struct DpOptions {
  bool anchors = true;  // pruning (ii)
  bool chains = true;   // pruning (iii)
};
LayoutPlan plan_layouts(const Graph& g, const CostModel& cm, const DpOptions& opt = {});

// The oracle: every assignment of every operator (and the state), by branch and bound.
LayoutPlan plan_layouts_exhaustive(const Graph& g, const CostModel& cm);

// The fixed plan without layout planning: matrix operators blocked when they must be, everything else
// dense, the state dense.
LayoutPlan fixed_layouts(const Graph& g, const CostModel& cm);

}  // namespace hanpu::plan
