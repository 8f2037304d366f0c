// The multi-engine runtime on the NPU model (DESIGN.md §6, the fusion notes' four-group experiment).
//
// One producer issues the stages of in-flight tasks onto a core's engines (DMA load and store, vector,
// matrix queues of sim/); an idle engine starts the first ready stage in issue order, so the same
// scheduler runs every group and only the entry structure and the barrier differ:
//   1 serial entries:       entry(A), then entry(B) once A has completed (each entry pays the launch);
//   2 concurrent entries:   both submitted at once: B's launch overlaps A's execution, but a core runs
//                           one entry at a time (Ascend: one kernel per AI core; Hexagon: HMX and VTCM
//                           are held per session), so B's stages start when A completes;
//   3 one entry, barrier:   one launch; B's first stages wait for A's last (internally serial);
//   4 one entry, no barrier: one launch; A's and B's stages interleave on the engines.
// In groups 3 and 4 both tasks are in flight, each in its own on-chip region: a pair whose regions
// exceed the device's vector memory is refused. A task completes at the end of its own last stage.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fuse/task.h"
#include "hanpu/status.h"
#include "plan/device.h"

namespace hanpu::fuse {

struct GroupResult {
  int group = 0;
  double makespan_us = 0;
  std::vector<double> completion_us;           // per task, from the first submission
  std::map<std::string, double> engine_busy_us;
  double gm_bytes = 0;
  double dma_stall_us = 0;                     // DMA time beyond each transfer's uncontended time
  int64_t peak_on_chip_bytes = 0;
};

// Runs `tasks` (two for the four groups) on core 0 of `d` as group `group` (1..4).
Status run_group(const std::vector<Task>& tasks, const plan::Device& d, int group, GroupResult* out,
                 std::string* trace = nullptr);

struct PairReport {
  std::vector<Task> tasks;
  GroupResult groups[4];
  double dma_us = 0, vector_us = 0, matrix_us = 0;  // engine time of the tasks each run alone (summed)
  double ideal = 0;        // (D + V + M) / max(D, V, M)
  double e_effect = 0;     // group 1 / group 3 makespan: entry-overhead amortisation
  double a_effect = 0;     // group 3 / group 4: resource complementarity
  double gain_over_2 = 0;  // group 2 / group 4
};

// Builds the two tasks (each region half the device's vector memory) and runs the four groups; `trace`
// receives group 4's trace.
Status run_pair(const std::string& a, const std::string& b, const plan::Device& d, PairReport* out,
                std::string* trace = nullptr);

}  // namespace hanpu::fuse
