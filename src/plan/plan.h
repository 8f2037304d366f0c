// Execution plans, the hub of hanpu (DESIGN.md §3): a strategy's planner passes applied for a device and
// a problem shape give the typed chunk graph, its layouts and lifetimes, and the mapping of the whole
// problem's work onto workers. The CPU executor and the NPU model both interpret this one plan. Its JSON
// form is versioned ("hanpu-plan/2"); derived fields (peaks, costs, in-place update, MACs) are recomputed
// on load and a file whose stored values disagree is refused. A plan is deterministic.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/device.h"
#include "plan/graph.h"
#include "plan/layout.h"
#include "plan/lifetime.h"
#include "plan/mapping.h"
#include "plan/packing.h"
#include "plan/strategy.h"

namespace hanpu::plan {

struct PlanOptions {
  int64_t C = 64, K = 128, V = 128;
  bool reorder = true;      // chunk-first pass
  bool gemm_first = true;   // GEMM-first rewriting
  bool layout_plan = true;  // DP layout planning (else the fixed layouts of fixed_layouts())
  KernelSplit kernels = KernelSplit::kFused;
  bool packed_update = false;  // fixed layouts: the update's GEMM reads a packed panel (KtV blocked)
  // The bf16 precision mode's cost model (plan/packing.h): every layout is a packing decision, made by the
  // DP (planned) or one of the ablation's fixed choices; layout_plan and packed_update are then unused.
  bool bf16 = false;
  Packing packing = Packing::kPlanned;
  // The CPU engine's row block of its row-blocked products (kernels/tril_inverse.h kTrilBlock; the engine
  // asserts they agree), which the bf16 cost model counts.
  int64_t row_block = 16;
};

struct Plan {
  Kind kind = Kind::kGdn;
  std::string device, device_file;  // the description's name and the file it was read from
  PlanOptions opt;
  Graph graph;
  LayoutPlan layouts;
  LifetimeReport lifetimes;
  double fla_order_macs = 0;  // matrix MACs of the same chunk in FLA's order, for the MAC report
  double clock_ghz = 1;
  // The execution plan's mapping (empty for a chunk plan alone: make_plan).
  std::string strategy;
  bool has_mapping = false;
  Mapping mapping;
};

// The chunk plan alone: graph, layouts and lifetimes of one chunk of a head.
Status make_plan(Kind kind, const Device& d, const PlanOptions& opt, Plan* out);
// The same chunk plan for `cols` value columns (a tail head's slice).
Status make_slice_plan(const Plan& whole, const Device& d, int64_t cols, Plan* out);

// What the execution plan maps beyond the chunk: the shape, the alignment of column slices (the CPU's
// GEMM column block, the device's block_cols on the NPU model) and the dataflow's knobs.
struct MapRequest {
  Shape shape;
  int64_t column_align = 0;  // 0: the device's block_cols
  int64_t segment_chunks = 0;
  bool chunk_parallel_fallback = false;
};

// The execution plan of a strategy (a registry name, plan/strategy.h) for a device and a shape. `po` gives
// C, K and V (its pass switches come from the strategy).
Status make_execution_plan(Kind kind, const Device& d, const std::string& strategy, const PlanOptions& po,
                           const MapRequest& req, Plan* out);
// The same with explicit strategy options (the CPU engine's switches); `name` is recorded.
Status make_execution_plan(Kind kind, const Device& d, const std::string& name, const StrategyOptions& so,
                           const PlanOptions& po, const MapRequest& req, Plan* out);

nlohmann::json plan_to_json(const Plan& p);
// Validates a plan document completely (schema, types, names, dependencies, layouts) and rebuilds the
// plan; errors name the field path, e.g. "steps[3].inputs[1]: unknown tensor 'Wx'".
Status plan_from_json(const std::string& text, Plan* out);

// Reads and validates a plan file (plan_from_json), prefixing errors with the path.
Status load_plan_file(const std::string& path, Plan* out);

// The readable report of `hanpu plan`: order with engine and layout per step, transform sites,
// per-memory peaks, MACs and the estimated cost.
std::string plan_report(const Plan& p);

// The plan's chunk cost per operator on device d (the cost model it was planned with): op i in its layout
// plus the transforms made before it; the chunk-end transforms are charged to the last operator. Sums to
// p.layouts.cost for DP and fixed layouts (not for the packing ablation's pack-always, whose per-row-block
// repacks belong to no single transform). For the model's side of `hanpu bench --breakdown`.
std::vector<double> op_cycles(const Plan& p, const Device& d);

// What a whole run's step costs beyond the plan's operators on device d: asking for its rows from memory
// one step ahead, the chunk graph's input and output bytes at Device::rows_memory_bytes_per_cycle (0 where
// d does not give it). The same in every layout, so never part of the plan's cost: bench adds it to a
// whole run's estimate, not to a step in cache's.
double step_memory_cycles(const Plan& p, const Device& d);

}  // namespace hanpu::plan
