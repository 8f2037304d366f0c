// The engine's strategies (include/hanpu/engine.h), each a function over a validated problem.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

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

// The most heads of one sequence and column slice a hanpu thread runs in lockstep (chunk c of each, then
// chunk c + 1), for states of [K, Vc] fp32: as many as fit half of a 1 MiB L2, leaving the other half for
// the chunk intermediates (about 0.5 MiB at C = 64, K = V = 128); 8 at K = V = 128.
inline int64_t lockstep_heads(int64_t K, int64_t Vc) {
  constexpr int64_t kGroupStateBytes = 512 * 1024;
  return std::max<int64_t>(1, kGroupStateBytes / (K * Vc * 4));
}

// One (sequence, value head) of a validated problem run step by step on the calling thread, for hanpu
// fuse's host chunk tasks: the hanpu strategy's own steps, so that running them in order computes, for that
// head, what run_hanpu computes, bit for bit. prepare(c) is #1-#3 of chunk c (its rows, scores and inverse);
// state(c) the program's state-dependent steps and the state update of chunk c, after prepare(c) and
// state(c - 1) (state(0) starts from the initial state, the last chunk's stores the final state). Each
// returns the flops it executed. With `timed`, each step's time is added by part to counters().ns, as the
// engine's --breakdown times them (hanpu bench --parts). `p`, `prog` and the outputs' memory must outlive it.
class HeadSteps {
 public:
  HeadSteps(const Problem& p, const ChunkProgram& prog, int64_t seq, int64_t hv, const Outputs& out, bool timed = false);
  ~HeadSteps();
  HeadSteps(const HeadSteps&) = delete;
  HeadSteps& operator=(const HeadSteps&) = delete;
  int64_t chunks() const;
  double prepare(int64_t c);
  double state(int64_t c);
  const Counters& counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The chunk program a call of `p` with `cfg` runs (the plan the engine makes for it on the host); an
// InvalidArgument error where cfg's strategy is not run by chunk programs (only the hanpu strategy is).
Status engine_chunk_program(const Problem& p, const EngineConfig& cfg, ChunkProgram* out);

// Splits `items` into `parts` contiguous ranges; part i gets [begin, end).
inline void static_range(int64_t items, int parts, int i, int64_t* begin, int64_t* end) {
  *begin = items * i / parts;
  *end = items * (i + 1) / parts;
}

}  // namespace hanpu
