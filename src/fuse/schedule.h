// The runtime's one scheduling producer (DESIGN.md §6), shared by both executors: it turns in-flight
// tasks and a group of the four-group experiment into a plan of stages with dependencies, and fixes the
// issue rule every executor follows: an idle lane starts the lowest-numbered stage of its own whose
// dependencies have finished.
//
//   group 1, serial entries:       entry(A), A's stages, entry(B) after A completes, B's stages;
//   group 2, concurrent entries:   entry(A) and entry(B) submitted at once (B's dispatch overlaps A), but a
//                                  core runs one entry at a time (Ascend: one kernel per AI core; Hexagon:
//                                  HMX and VTCM are held per session): B's first stages wait for A;
//   group 3, one entry, barrier:   one entry; B's first stages wait for A's last (internally serial);
//   group 4, one entry:            one entry; every task's stages issue as soon as they are ready.
// In one entry (3, 4) every task is in flight with its own on-chip region: a set whose regions exceed
// the on-chip memory is refused. Each task completes at the end of its own last stage.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fuse/task.h"
#include "hanpu/status.h"
#include "sim/lower.h"

namespace hanpu::fuse {

enum class Lane { kControl, kDma, kVector, kMatrix };
// The lane that runs stages of an engine class.
Lane lane_of(EngineClass e);

struct PlannedStage {
  int task = -1;   // -1: an entry (dispatch) on the control lane
  int stage = -1;  // index into the task's stages
  Lane lane = Lane::kControl;
  std::vector<int> deps;  // earlier planned stages
  std::string label;
};

struct GroupPlan {
  int group = 0;
  bool one_entry = false;
  std::vector<PlannedStage> stages;
  std::vector<std::vector<int>> task_stages;  // planned ids of each task's stages
  std::vector<int> entries;                   // planned ids of the entries
  std::vector<int64_t> region_offset;         // each task's region: [offset, offset + on_chip_bytes)
};

// `capacity`: the on-chip bytes in-flight regions share (named `memory` in the refusal message).
Status plan_group(const std::vector<Task>& tasks, int group, int64_t capacity, const std::string& memory,
                  GroupPlan* out);

struct GroupResult {
  int group = 0;
  double makespan_us = 0;
  std::vector<double> completion_us;  // per task, from the first dispatch
  std::map<std::string, double> engine_busy_us;  // per lane, by the executor's name for it
  std::map<Lane, double> lane_busy_us;
  double gm_bytes = 0;
  // DMA time beyond each transfer's uncontended time: on the model, set-up plus bytes at the path's own
  // rate; on the host, the same stage's time when its task ran alone (run_pair). -1: not measured.
  double dma_stall_us = -1;
  int64_t peak_on_chip_bytes = 0;
  std::vector<std::vector<double>> stage_us;  // per task, each stage's duration
};

// Completion, busy time per lane (named by `lane_name`), regions and their peak from one execution's
// stage times (ns from the first dispatch). `regions` receives the occupancy counter of `memory`.
GroupResult summarise(const GroupPlan& plan, const std::vector<Task>& tasks, const std::vector<double>& start_ns,
                      const std::vector<double>& end_ns, const std::map<Lane, std::string>& lane_name,
                      const std::string& memory, sim::Counter* regions);

// A Chrome/Perfetto trace of one execution: a lane per `lane_name`, flow arrows for dependencies, the
// regions' occupancy counter.
std::string plan_trace(const GroupPlan& plan, const std::map<Lane, std::string>& lane_name,
                       const std::vector<double>& start_ns, const std::vector<double>& end_ns,
                       const sim::Counter& regions, const std::string& title);

}  // namespace hanpu::fuse
