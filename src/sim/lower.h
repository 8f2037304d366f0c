// Lowering the engine's strategies onto the NPU model (sim/event_sim.h): a plan's chunk steps become
// tile-level tasks on a device's cores, mapped the way each strategy maps work.
//
// Per chunk step (plan/graph.h): a matrix step is an operand load into the matrix unit (MTE1, at the
// L1->L0 rate), the matrix computation (Cube), and the result's move to the vector memory (FixPipe at
// the L0C->UB rate, or the Vector unit where the device relays results through it: 310P); a vector step
// runs on the vector unit; a layout transform before a step is vector work of the cost model's transform
// cycles. Cycles come from the planner's cost model, so the simulator and the planner agree on every
// operator's cost. Chunk inputs are loaded from global memory (MTE2) and outputs stored (MTE3) with the
// device's per-transfer set-up and the chip's shared bandwidth. Buffer capacities: sim/spill.h (spilled
// tensors are stored and reloaded through the same global-memory paths).
//
// What runs where is the execution plan's mapping (plan/mapping.h), made by the strategies' planner passes
// (plan/strategy.h) and shared with the CPU executor:
// - native: one launch per DESIGN step (#1 .. #6), every intermediate materialised in global memory.
// - fla: three launches (#1-#4 over (head, chunk) pairs dealt round robin; #5 over heads, chunks in
//   order, writing V' and every chunk's state; #6 over (head, chunk) pairs).
// - fla-megakernel: fla's phases in one launch, separated by cross-core barriers.
// - flashqla: #1-#4 over (head, chunk); segment warm-ups from a zero state over (head, segment); a serial
//   pass over each head's segments handing states on; then state recurrence and outputs fused over
//   (head, segment). The warm-up length depends on the gates, so it is a workload parameter.
// - hanpu: head-level mapping (head h on core h mod cores, all its chunks there, state and intermediates
//   on chip, one launch); the tail heads (heads mod cores) are split column-wise along V into slices
//   when the cost model says the slices finish sooner (duplicating the V-independent steps).
// Ablation steps: fla, +fusion (head-level, FLA's order, fixed layouts, no tail split), +tail-split,
// +chunk-first, +gemm-first, +layout-plan (= hanpu).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "sim/event_sim.h"

namespace hanpu::sim {

struct Workload {
  Kind kind = Kind::kGdn;
  int64_t heads = 16;    // value heads, each an independent head-level unit
  int64_t tokens = 4096;
  int64_t C = 64, K = 128, V = 128;
  int64_t warmup_chunks = 2;   // flashqla: chunks of each segment's warm-up (data-dependent: the gates)
  int64_t segment_chunks = 0;  // flashqla: chunks per segment (0: FlashQLA's rule)
};

struct SimRecord {
  std::string device, strategy, kind;
  int64_t tokens = 0, heads = 0;
  double latency_us = 0;
  double gm_bytes = 0;     // every byte moved to or from global memory (spills included)
  double spill_bytes = 0;  // of which spill stores and reloads
  double l1_to_l0_bytes = 0, matrix_macs = 0;
  double executed_macs = 0;  // as the matrix unit runs them: whole blocks (OpNode::executed_macs)
  double matrix_util = 0, vector_util = 0;
  // Calibration metrics (research/ha_npu_calibration.md): the fraction of the makespan during which a
  // global-memory transfer is in flight (per core, averaged over cores; C5), and the layout transforms'
  // share of cross-unit time: transforms / (transforms + operand moves into the matrix unit + result
  // moves out of it), in busy time (C7).
  double gm_share = 0, transform_share = 0;
  // Device-memory footprint: the inputs (once), every tensor the run writes there (outputs, states,
  // materialised intermediates; none freed before the run ends, as FLA-style dataflows keep them) and the
  // spill scratch (one chunk's spill stores per core).
  double gm_footprint_bytes = 0;
  double energy_uj = 0;
  std::map<std::string, double> engine_busy;      // busy fraction of the makespan, averaged over cores
  std::map<std::string, int64_t> peak_bytes;      // planned on-chip footprint per buffer, after spills
  std::map<std::string, int64_t> sim_peak_bytes;  // simulated occupancy peak per buffer (any core)
  int64_t tasks = 0, launches = 0;
  int tiled_steps = 0;  // a chunk's operators run in tiles because their operands exceed a buffer (sim/spill.h)
  int tail_split = 1;  // hanpu: column slices per tail head
};

// Queue names of a device's engines (its description's sim.queues), and the control lane that launches and
// barriers occupy.
using Engines = plan::Queues;
Engines engines_of(const plan::Device& d);

// Plans the strategy or ablation step (plan/strategy.h) for the device and the workload, lowers the plan
// and simulates it. The device needs a "sim" section. With `trace`, also the Chrome/Perfetto trace.
Status simulate_strategy(const std::string& strategy, const plan::Device& d, const Workload& w, SimRecord* out,
                         std::string* trace = nullptr);
// Lowers an execution plan's mapping (made for this device) and simulates it; `w` gives the warm-up
// length, the only workload parameter not in the plan.
Status simulate_plan(const plan::Plan& pl, const plan::Device& d, const Workload& w, SimRecord* out,
                     std::string* trace = nullptr);

// Buffer occupancy over time: the counter track of one (core, memory).
struct Counter {
  int core = 0;
  std::string memory;
  std::vector<std::pair<double, int64_t>> points;  // (ns, bytes) at each change
};

// The counter of one (core, memory) from (ns, +-bytes) changes: sorted (frees before allocations at the
// same instant), one point per instant; `peak` receives the highest level reached.
Counter occupancy_counter(int core, const std::string& memory, std::vector<std::pair<double, int64_t>> deltas,
                          int64_t* peak);

// A Chrome trace-event JSON (opens in ui.perfetto.dev): one process per core, one thread lane per engine,
// a complete event per task (microseconds), flow arrows for dependencies across engines, and a counter
// track per (core, buffer) for occupancy.
std::string chrome_trace(const Program& p, const Schedule& s, const std::string& title,
                         const std::vector<Counter>& counters = {});

}  // namespace hanpu::sim
