// Buffer capacities in the NPU model: when a chunk's live data exceed an on-chip memory, some tensors
// leave it for global memory and come back before their next use.
//
// The footprint is the planner's lifetime model (plan/lifetime.h: steps run one after another, each
// tensor present in a memory from its first to its last use there). Walking the steps in order, while a
// memory's live bytes exceed its capacity, the tensor present there whose next use is furthest away
// (Belady's choice; ties: larger first, then lower id) and which the current step does not touch leaves
// it after its previous use and is reloaded before its next one. A tensor that only exists on chip
// (produced in this kernel, or the state) is stored first, once; inputs and tensors materialised by an
// earlier kernel are simply reloaded. A step whose own operands do not fit is an error: the model does
// not split operators into smaller tiles.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hanpu/status.h"
#include "plan/device.h"
#include "plan/graph.h"
#include "plan/lifetime.h"

namespace hanpu::sim {

struct SpillMove {
  int tensor = -1;
  std::string memory;
  int kernel = 0;
  int64_t bytes = 0;
  int after_step = 0;   // stored after this step (-1: at the chunk start)
  int before_step = 0;  // reloaded before this step (== ops: at the chunk end, for the next chunk)
  bool store = false;   // false: a copy is already in global memory
};

struct SpillPlan {
  std::vector<SpillMove> moves;
  // Where tensors are present after the moves: each residency cut at its gaps (the uses inside each piece).
  std::vector<plan::Residency> presence;
  std::map<std::string, int64_t> peak_bytes;  // per on-chip memory, after the moves
  int64_t store_bytes = 0, reload_bytes = 0;  // per chunk
};

Status plan_spills(const plan::Graph& g, const plan::Device& d, SpillPlan* out);

}  // namespace hanpu::sim
