// The multi-engine runtime's executors (DESIGN.md §6): the scheduler of fuse/schedule.h run on the NPU
// model (model), where each lane is an engine queue of core 0 with the device's entry (launch) cost
// and DMA over the chip's shared bandwidth; and on this CPU (host), where each lane is a pinned worker
// thread running the stages' real kernels (matrix on the first allowed CPU, vector and DMA on the
// second), the control lane is the dispatching thread, and an entry's cost is a real dispatch; and on
// one core of this CPU (host-core), where the two tasks share one core's engines and group 4 interleaves
// their instruction streams (fuse/core_executor.cpp).
#pragma once

#include <string>
#include <vector>

#include "fuse/schedule.h"
#include "plan/device.h"

namespace hanpu::fuse {

enum class Executor { kModel, kHost, kHostCore };

// Runs `tasks` as `group` (1..4) on the NPU model of `d` (which needs a "sim" section).
Status run_group(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                 std::string* trace = nullptr);

// Runs `tasks` (built with host data) as `group` on this CPU; `capacity` bytes of on-chip memory (L2).
Status run_group_host(const std::vector<Task>& tasks, int group, int64_t capacity, GroupResult* out,
                      std::string* trace = nullptr);

// Runs `tasks` (built with host data) as `group` on one core of this CPU (the first allowed CPU), its
// on-chip memory that of `d` (the host device; its vector rate prices the copies when group 4 sizes its
// slices). Group 4 needs two tasks. `two_cores`: group 2's two entries run on two cores instead of one.
Status run_group_core(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                      std::string* trace = nullptr, bool two_cores = false);

// Whether the kernel set in use runs its bf16 GEMMs on a matrix engine beside the vector unit (AMX
// tiles), so that one core can overlap them with vector work; false: the matrix lane is the vector unit.
bool host_matrix_engine();

// The NPU model's prediction of two tasks on one core of this CPU: each task's own stage DAG on a model
// device whose queues are the core's engines (copies, vector passes and, without a matrix engine, the
// GEMMs on one "core" queue; with one, a "matrix" queue beside it), every stage at the rate its engine
// class showed in the tasks' alone runs on the one-core executor (`alone`, group 1 each: busy time over
// work), an entry at their mean entry time. What the model leaves out (caches shared by the two
// streams, the interleaving's bookkeeping, a time-sliced group 2) is the distance to the measurement.
Status predict_core(const std::vector<Task>& tasks, const std::vector<GroupResult>& alone, const plan::Device& host,
                    bool matrix_engine, GroupResult out[4]);

struct PairReport {
  std::string executor, device;
  std::vector<Task> tasks;
  GroupResult groups[4];
  // host-core: group 2 with its two entries on two cores (groups[1] is on one core; run where the
  // process may use two CPUs), and the lane the GEMMs run on.
  bool has_two_cores = false;
  GroupResult group2_two_cores;
  double gain_over_2_two_cores = 0;  // group 2 on two cores / group 4 on one
  std::string matrix_lane;
  bool matrix_engine = false;
  GroupResult model[4];  // host-core: predict_core's groups for the pair on this core
  // host-core without a matrix engine: the same prediction with the GEMMs on an engine beside the core
  // at the rate they ran here (what a matrix engine of that speed would leave to overlap); else unset.
  bool has_engine_model = false;
  GroupResult engine_model[4];
  double dma_us = 0, vector_us = 0, matrix_us = 0;  // engine time of the tasks each run alone (summed)
  // (D + V + M) / max(D, V, M); on one core, where copies and vector passes share the core's own
  // instruction stream, (D + V + M) / max(D + V, M) with a matrix engine and 1 without one.
  double ideal = 0;
  double e_effect = 0;     // group 1 / group 3 makespan: entry-overhead amortisation (mechanism E)
  double a_effect = 0;     // group 3 / group 4: resource complementarity (mechanism A)
  double gain_over_2 = 0;  // group 2 / group 4
};

// Builds the two tasks (each region half the on-chip memory) and runs the four groups; `trace`
// receives group 4's trace. The host (`d` = the host device) runs `reps` interleaved repetitions of the
// six runs (each task alone, the four groups; host-core a seventh: group 2 on two cores) and keeps each
// run's median-makespan repetition.
Status run_pair(const std::string& a, const std::string& b, const plan::Device& d, Executor ex, PairReport* out,
                std::string* trace = nullptr, int reps = 5);

}  // namespace hanpu::fuse
