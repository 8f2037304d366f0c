// The multi-engine runtime's executors (DESIGN.md §6): the scheduler of fuse/schedule.h run on the NPU
// model (model), where each lane is an engine queue of core 0 with the device's entry (launch) cost
// and DMA over the chip's shared bandwidth; and on this CPU (host), where each lane is a pinned worker
// thread running the stages' real kernels (matrix on the first allowed CPU, vector and DMA on the
// second), the control lane is the dispatching thread, and an entry's cost is a real dispatch.
#pragma once

#include <string>
#include <vector>

#include "fuse/schedule.h"
#include "plan/device.h"

namespace hanpu::fuse {

enum class Executor { kModel, kHost };

// Runs `tasks` as `group` (1..4) on the NPU model of `d` (which needs a "sim" section).
Status run_group(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                 std::string* trace = nullptr);

// Runs `tasks` (built with host data) as `group` on this CPU; `capacity` bytes of on-chip memory (L2).
Status run_group_host(const std::vector<Task>& tasks, int group, int64_t capacity, GroupResult* out,
                      std::string* trace = nullptr);

struct PairReport {
  std::string executor, device;
  std::vector<Task> tasks;
  GroupResult groups[4];
  double dma_us = 0, vector_us = 0, matrix_us = 0;  // engine time of the tasks each run alone (summed)
  double ideal = 0;        // (D + V + M) / max(D, V, M)
  double e_effect = 0;     // group 1 / group 3 makespan: entry-overhead amortisation (mechanism E)
  double a_effect = 0;     // group 3 / group 4: resource complementarity (mechanism A)
  double gain_over_2 = 0;  // group 2 / group 4
};

// Builds the two tasks (each region half the on-chip memory) and runs the four groups; `trace`
// receives group 4's trace. The host (`d` = the host device) runs `reps` interleaved repetitions of the
// six runs (each task alone, the four groups) and keeps each run's median-makespan repetition.
Status run_pair(const std::string& a, const std::string& b, const plan::Device& d, Executor ex, PairReport* out,
                std::string* trace = nullptr, int reps = 5);

}  // namespace hanpu::fuse
