// The discrete-event core of the NPU model: cores with independent engines (Ascend: MTE2, MTE1, Cube,
// Vector, MTE3, FixPipe; Hexagon: DMA, HVX, HMX) executing tile-level tasks with explicit dependencies.
//
// Semantics (deterministic: the same program gives the same schedule, bit for bit):
// - every (core, engine) is an in-order queue: a task starts when it is at the head of its queue, its
//   dependencies have finished, and the engine is idle (the way a pipe executes its instruction stream);
//   with Machine::issue_ready_first, the first task of the queue whose dependencies have finished;
// - a compute task occupies its engine for `cycles` / clock;
// - a transfer task occupies its engine for `latency_cycles` / clock (descriptor set-up), then moves
//   `bytes` at the lower of its path's rate and, if it touches global memory, its share of the chip's
//   global-memory bandwidth, which all global-memory transfers in flight share equally (fluid sharing:
//   rates are recomputed whenever a transfer starts or ends);
// - ties are broken by task id, so the schedule never depends on container order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hanpu/status.h"

namespace hanpu::sim {

struct Task {
  int core = 0;
  std::string engine;           // queue name within the core, e.g. "MTE2", "Cube", "Vector"
  double cycles = 0;            // compute: engine cycles; transfer: fixed set-up cycles
  double bytes = 0;             // > 0 makes it a transfer
  double path_bytes_per_cycle = 0;  // transfer: the path's own rate
  bool global = false;          // transfer: touches global memory (shares the chip bandwidth)
  std::vector<int> deps;        // task ids that must finish first (earlier ids only)
  std::string label;
};

struct Machine {
  double clock_ghz = 1;
  double global_bytes_per_ns = 0;  // the chip's global-memory bandwidth (GB/s == bytes/ns); 0: unlimited
  // false: every queue is in order (a pipe's instruction stream). true: an idle engine starts the
  // lowest-id task of its queue whose dependencies are done (a runtime issuing ready stages).
  bool issue_ready_first = false;
};

struct Schedule {
  std::vector<double> start_ns, end_ns;
  double makespan_ns = 0;
  std::map<std::pair<int, std::string>, double> busy_ns;  // per (core, engine)
  double global_bytes = 0;                                 // bytes moved to or from global memory
};

class Program {
 public:
  // Appends a task; returns its id. Dependencies must name earlier tasks.
  int add(Task t);
  const std::vector<Task>& tasks() const { return tasks_; }

 private:
  std::vector<Task> tasks_;
};

// Runs the program; errors name a bad task (dependency on a later task, negative work, missing rate).
Status simulate(const Program& p, const Machine& m, Schedule* out);

}  // namespace hanpu::sim
