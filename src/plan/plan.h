// Static execution plans: the planner's passes applied to a chunk graph for a device, and the plan's
// versioned JSON form ("hanpu-plan/1"). A plan is deterministic: the same arguments give the same JSON.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/device.h"
#include "plan/graph.h"
#include "plan/layout.h"
#include "plan/lifetime.h"

namespace hanpu::plan {

struct PlanOptions {
  int64_t C = 64, K = 128, V = 128;
  bool reorder = true;      // chunk-first pass
  bool gemm_first = true;   // GEMM-first rewriting
  bool layout_plan = true;  // DP layout planning (else the fixed layouts of fixed_layouts())
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
};

Status make_plan(Kind kind, const Device& d, const PlanOptions& opt, Plan* out);

nlohmann::json plan_to_json(const Plan& p);
// Validates a plan document completely (schema, types, names, dependencies, layouts) and rebuilds the
// plan; errors name the field path, e.g. "steps[3].inputs[1]: unknown tensor 'Wx'".
Status plan_from_json(const std::string& text, Plan* out);

// Reads and validates a plan file (plan_from_json), prefixing errors with the path.
Status load_plan_file(const std::string& path, Plan* out);

// The readable report of `hanpu plan`: order with engine and layout per step, transform sites,
// per-memory peaks, MACs and the estimated cost.
std::string plan_report(const Plan& p);

}  // namespace hanpu::plan
