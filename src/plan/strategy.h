// Strategies as planner passes: each named strategy (and each step of the ablation ladder) is one entry of
// this registry — a dataflow plus the technique switches — and produces an execution plan's mapping.
// Every list of strategy names (CLI help, errors, the Python package, the bench and the model) comes from
// here. Adding a strategy with an existing dataflow is one entry in strategy.cpp plus its tests.
#pragma once

#include <string>
#include <vector>

#include "plan/graph.h"
#include "plan/mapping.h"

namespace hanpu::plan {

// How the chunk's work is laid out over launches and workers (DESIGN.md §2).
enum class Dataflow {
  kNative,         // one launch per DESIGN step, every intermediate in memory
  kFla,            // chunk-head-chunk, three launches
  kFlaMegakernel,  // fla's phases in one launch, barriers between them
  kFlashQla,       // chunk-seg-seg: segment-parallel state passing
  kHeadLevel,      // hanpu: a unit's chunks on one worker, all on chip
};

struct StrategyOptions {
  Dataflow dataflow = Dataflow::kHeadLevel;
  // hanpu's techniques (the baselines keep FLA's order and fixed layouts):
  bool tail_split = true;   // split tail heads along V when the cost model says the slices finish sooner
  bool chunk_first = true;  // chunk-first order: the state updated in place after its last read
  bool gemm_first = true;   // GEMM-first rewriting
  bool layout_plan = true;  // the layout DP (else fixed layouts)
};

struct StrategyInfo {
  std::string name, help;
  StrategyOptions opt;
};

// native, fla, fla-megakernel, flashqla, hanpu.
const std::vector<StrategyInfo>& strategies();
// The ablation ladder: fla, then hanpu's techniques added one at a time (+fusion, +tail-split, +chunk-first,
// +gemm-first, +layout-plan = hanpu).
const std::vector<StrategyInfo>& ablation_ladder();
// The names of a list (strategies() or ablation_ladder()), in order.
std::vector<std::string> names_of(const std::vector<StrategyInfo>& list);
// A strategy or ablation step by name; nullptr when unknown.
const StrategyInfo* find_strategy(const std::string& name);
// "native, fla, ..." (with the ablation steps when asked), for help texts and errors.
std::string strategy_names(bool with_ablation = false);
// The error for an unknown name, listing the known ones.
Status unknown_strategy(const std::string& name, bool with_ablation = false);

// The chunk graph's launch split of a dataflow.
KernelSplit kernel_split(Dataflow d);

// What the mapping passes need beyond the shape.
struct MapInputs {
  double head_cost = 0;                   // estimated cost of one chunk of a whole head (any unit)
  std::vector<double> slice_cost;         // slice_cost[s]: one chunk of a head's slice when split s ways (s >= 2)
  int64_t segment_chunks = 0;             // flashqla: chunks per segment (0: FlashQLA's rule)
  bool chunk_parallel_fallback = false;   // hanpu: prepare chunks over all workers for extreme tails
};

// FlashQLA's segment length rule, max(4, 2^round(log2(3 sqrt(units * chunks / workers)))).
int64_t segment_length(int64_t units, int64_t chunks, int workers);

// The tail split by cost: column slices s per tail head minimising ceil(tail * s / workers) waves of one
// slice's chunk cost (s = 1: one wave of whole heads). Candidates s are those with slice_cost[s] set.
int choose_tail_split(int64_t tail, int workers, double head_cost, const std::vector<double>& slice_cost);

// Width of each column slice of V when split s ways at multiples of `align` (the last may be narrower).
int64_t slice_width(int64_t V, int s, int64_t align);

// The mapping a strategy's dataflow gives a shape.
Status map_work(const StrategyOptions& so, const Shape& shape, int64_t column_align, const MapInputs& in, Mapping* out);

}  // namespace hanpu::plan
