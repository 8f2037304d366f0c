// The mapping of an execution plan: how the work of a whole problem is laid onto workers (CPU threads or
// NPU cores). This is where the HA-NPU paper's system lives — heads on workers, tail splits along V, FLA's
// launches and phases, FlashQLA's segments — and both interpreters (the CPU executor, exec/, and the NPU
// model, sim/) execute exactly these items: neither decides any of it again.
//
// A problem has N sequences of value heads HV each; unit (n, hv) is one value head of one sequence with
// chunks(n) chunks. A mapping is a list of phases (each a launch, or a barrier inside the launch before
// it) and, per phase, work items: a unit's chunk range and value-column slice on one worker. A worker runs
// its items of a phase in list order; a phase starts when every item of the previous one has finished.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hanpu/status.h"

namespace hanpu::plan {

// What a phase's items compute (DESIGN.md §1 steps; "stored" = written to memory for a later phase).
enum class Work {
  kLoad,        // native #1: a chunk's rows and gate factors, stored
  kScores,      // native #2: A, stored
  kSolve,       // native #3: T = (I + A)^-1, stored
  kWU,          // native #4: W and U from the stored rows and T
  kPrepareWU,   // fla #1-#4 fused per chunk: only W, U (and the chunk's decay) stored
  kRecurrence,  // #5 over a unit's chunks in order: every chunk's state h[c] and V' stored
  kOutput,      // #6 per chunk from the stored h[c] and V'
  kWarmup,      // flashqla: a segment's end state from a zero state over its last chunks, stored
  kHandOn,      // flashqla: a unit's segment initial states handed on serially
  kSegment,     // flashqla: recurrence and output over a segment from its handed-on state
  kHead,        // hanpu: #1-#6 over a unit's chunks, state and intermediates on the worker
  kPrepare,     // hanpu extreme-tail fallback: a chunk's state-independent part (#1-#3, P), stored
  kStatePart,   // hanpu extreme-tail fallback: the state-dependent part over a unit's chunks
};
const char* work_name(Work w);
bool parse_work(const std::string& name, Work* out);

// Whether items of this work carry a state through a unit's chunks, so an item must cover all of them.
bool work_is_chain(Work w);
// Whether items of this work may take a slice of the value columns (the head-level works).
bool work_slices_columns(Work w);

enum class Sync { kLaunch, kBarrier };

struct Phase {
  Work work = Work::kHead;
  Sync sync = Sync::kLaunch;
  unsigned kernels = ~0u;  // the chunk graph's kernels (OpNode::kernel) this phase runs: bit k = kernel k
  // Where the phase's kernels are separate launches on an NPU (FLA's cumsum | kkt + solve | wy), their
  // masks in order, each launch over all the phase's items; empty: one launch of all of `kernels`. The
  // first follows `sync`, the rest are launches (barriers inside a megakernel). The CPU executor runs a
  // phase's items in one pass whatever the split.
  std::vector<unsigned> launches;
};

struct WorkItem {
  int phase = 0, worker = 0;
  int64_t seq = 0, hv = 0;          // the unit
  int64_t chunk0 = 0, chunks = 0;   // chunk range [chunk0, chunk0 + chunks) of the sequence
  int64_t col0 = 0, cols = 0;       // value columns [col0, col0 + cols)
};

// The problem's shape as the planner sees it.
struct Shape {
  std::vector<int64_t> seq_tokens;  // tokens of each sequence (0 for an empty one)
  int64_t C = 64, HV = 1, V = 128;
  int workers = 1;
  int64_t sequences() const { return static_cast<int64_t>(seq_tokens.size()); }
  int64_t chunks(int64_t n) const { return (seq_tokens[n] + C - 1) / C; }
  int64_t units() const { return sequences() * HV; }
  int64_t total_chunks() const;
};

struct Mapping {
  Shape shape;
  std::vector<Phase> phases;
  std::vector<WorkItem> items;  // grouped by phase, in phase order
  int tail_split = 1;           // column slices per tail head (head-level strategies)
  int64_t segment_chunks = 0;   // flashqla: chunks per segment
  int64_t column_align = 1;     // column slices start at multiples of this

  // Item index ranges [begin, end) of each phase (items are grouped by phase).
  std::vector<std::pair<std::size_t, std::size_t>> phase_ranges() const;
};

// Checks that the mapping is executable: every index in range, slices aligned, and per phase each unit's
// chunks x columns covered exactly once (warm-ups: every segment but a sequence's last; hand-ons: one item
// per unit), chains whole. Errors name the item, e.g. "mapping.items[12]: ...".
Status check_mapping(const Mapping& m);

nlohmann::json mapping_to_json(const Mapping& m);
Status mapping_from_json(const nlohmann::json& j, Mapping* out);

}  // namespace hanpu::plan
