// Buffer capacities in the NPU model: when a chunk's live data exceed an on-chip memory, some tensors
// leave it for global memory and come back before their next use.
//
// The footprint is the planner's lifetime model (plan/lifetime.h: steps run one after another, each
// tensor present in a memory from its first to its last use there). Walking the steps in order, while a
// memory's live bytes exceed its capacity, the tensor present there whose next use is furthest away
// (Belady's choice; ties: larger first, then lower id) and which the current step does not touch leaves
// it after its previous use and is reloaded before its next one. A tensor that only exists on chip
// (produced in this kernel, or the state) is stored first, once; inputs and tensors materialised by an
// earlier kernel are simply reloaded.
//
// A step whose own operands and result do not fit even then is tiled: it runs in n row/column tiles (the
// smallest n from 2 to kMaxTiles that fits; the model does not tell the axes apart), each of its tensors
// in that memory streaming through 1/n of its size. Such a tensor leaves the memory around the step like
// a spilled one: an operand is stored after its previous use (if only on chip) and reloaded, tile by
// tile, for the step, and again before its next use; the result is stored tile by tile and reloaded
// before its next use. Only a step that does not fit in kMaxTiles tiles is an error.
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

// A step run in tiles.
struct TiledStep {
  int step = 0;
  std::string memory;
  int tiles = 1;
};

constexpr int kMaxTiles = 64;

struct SpillPlan {
  std::vector<SpillMove> moves;
  // Where tensors are present after the moves: each residency cut at its gaps (the uses inside each piece).
  std::vector<plan::Residency> presence;
  std::map<std::string, int64_t> peak_bytes;  // per on-chip memory, after the moves
  std::vector<TiledStep> tiled;
  int64_t store_bytes = 0, reload_bytes = 0;  // per chunk
};

Status plan_spills(const plan::Graph& g, const plan::Device& d, SpillPlan* out);

}  // namespace hanpu::sim
