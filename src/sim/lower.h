// Lowering the engine's strategies onto the NPU model (sim/event_sim.h): a plan's chunk steps become
// tile-level tasks on a device's cores, mapped the way each strategy maps work.
//
// Per chunk step (plan/graph.h): a matrix step is an operand load into the matrix unit (MTE1, at the
// L1->L0 rate), the matrix computation (Cube), and the result's move to the vector memory (FixPipe, at
// the L0C->UB rate); a vector step runs on the vector unit; a layout transform before a step is vector
// work of the cost model's transform cycles. Cycles come from the planner's cost model, so the
// simulator and the planner agree on every operator's cost. Chunk inputs are loaded from global memory
// (MTE2) and outputs stored (MTE3) with the device's per-transfer set-up and the chip's shared bandwidth.
//
// - hanpu: head-level mapping (head h on core h mod cores), every chunk of a head on its core, state and
//   intermediates on chip; one launch.
// - fla: FLA's three launches: #1-#4 over (head, chunk) pairs dealt round robin, writing their
//   hand-offs to global memory; #5 over heads, chunks in order, reading them and writing V' and every
//   chunk's state; #6 over (head, chunk) pairs; each launch waits for the previous one plus the launch
//   overhead.
// Not modelled yet: buffer capacities (spills), tail splitting, native / fla-megakernel / flashqla, energy,
// buffer-occupancy counter tracks.
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
};

struct SimRecord {
  std::string strategy, kind;
  int64_t tokens = 0, heads = 0;
  double latency_us = 0;
  double gm_bytes = 0, l1_to_l0_bytes = 0, matrix_macs = 0;
  double matrix_util = 0, vector_util = 0;
  std::map<std::string, double> engine_busy;  // busy fraction of the makespan, averaged over cores
  std::map<std::string, int64_t> peak_bytes;  // on-chip peaks of the lowered plan (plan/lifetime.h)
  int64_t tasks = 0;
};

// The strategies the model lowers.
const std::vector<std::string>& sim_strategies();
// The ablation: fla, then head-level fusion (+fusion: FLA's order, fixed layouts), + chunk-first,
// + GEMM-first, + layout planning (= hanpu).
const std::vector<std::string>& sim_ablation_steps();

// Plans the chunk for the device (the passes the strategy or ablation step uses, fla's kernel split for
// "fla"), lowers it and simulates it. The device needs a "sim" section. With `trace`, also the
// Chrome/Perfetto trace of the run (chrome_trace).
Status simulate_strategy(const std::string& strategy, const plan::Device& d, const Workload& w, SimRecord* out,
                         std::string* trace = nullptr);

// A Chrome trace-event JSON (opens in ui.perfetto.dev): one process per core, one thread lane per engine,
// a complete event per task (microseconds), flow arrows for dependencies across engines.
std::string chrome_trace(const Program& p, const Schedule& s, const std::string& title);

}  // namespace hanpu::sim
