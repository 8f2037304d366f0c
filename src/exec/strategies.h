// The engine's strategies (include/hanpu/engine.h), each a function over a validated problem.
#pragma once

#include "exec/chunk_kernels.h"
#include "exec/chunk_program.h"
#include "exec/thread_pool.h"
#include "hanpu/engine.h"
#include "plan/mapping.h"

namespace hanpu {

// The executors of an execution plan's mapping (the pool's size is the mapping's workers). hanpu: the
// head-level works (head, or prepare + state-part) running the plan's chunk program; with breakdown, its
// steps timed by kind into stats->breakdown_ms.
void run_hanpu(const Problem& p, const ChunkProgram& prog, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out,
               bool breakdown, RunStats* stats);
// native, fla and fla-megakernel (strategy_fla.cpp).
void run_materialising(const Problem& p, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out, RunStats* stats);
void run_flashqla(const Problem& p, const EngineConfig& cfg, const plan::Mapping& mp, ThreadPool& pool, const Outputs& out,
                  RunStats* stats);

// Splits `items` into `parts` contiguous ranges; part i gets [begin, end).
inline void static_range(int64_t items, int parts, int i, int64_t* begin, int64_t* end) {
  *begin = items * i / parts;
  *end = items * (i + 1) / parts;
}

}  // namespace hanpu
