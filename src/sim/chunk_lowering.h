// One lowering of a plan's chunk onto engine queues, shared by the NPU model (sim/lower.cpp) and the
// fusion runtime's GDN/KDA tasks (fuse/task.cpp): a matrix step is an operand load into the matrix unit
// (at the L1->L0 rate), the matrix computation, and the result's move out (at the L0C->UB rate); a vector
// step runs on the vector unit; a layout transform before a step is vector work of the cost model's
// transform cycles. Cycles come from the planner's cost model, so the simulator and the planner agree on
// every operator's cost. Chunk inputs are loaded from global memory and outputs stored; spilled tensors
// (sim/spill.h) are stored and reloaded through the same paths. Operands of the matrix unit get there the
// way they must (per-tensor dtypes, plan/lifetime.h): a tensor computed in fp32 is first cast to the
// operand size on the vector unit ("cast", reading fp32 at the vector rate), and where the matrix unit's
// operand memory is not the vector memory (Ascend L1 vs UB) anything made or cast on chip is moved across
// ("forward", at the UB -> L1 rate on the queue that reads UB); operands loaded from global memory at the
// operand size land in the operand memory directly. Each tensor is cast and forwarded once per chunk.
// Where the work lands is the sink's business: the model's per-core engine queues, or a fusion task's
// stages.
//
// Back-pressure between the chunks on a core: a chunk's loads land in one of the device's load slots
// (Device::load_slots), so they wait for the end of the chunk that many chunks earlier; and when two
// chunks' working sets do not fit the vector memory together (twice the planned peak above its capacity),
// a chunk's work waits for the previous chunk's end (its loads still run ahead into their slots).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plan/layout.h"
#include "plan/plan.h"
#include "sim/spill.h"

namespace hanpu::sim {

using KernelMask = unsigned;  // bit k: kernel k runs in this piece of work
constexpr KernelMask kAllKernels = ~0u;

// Where a chunk lowering emits its work. Ids are the sink's (increasing); deps are ids emitted earlier.
class ChunkSink {
 public:
  // kForward: a vector-memory tensor into the matrix unit's operand memory (Ascend UB -> L1).
  enum class Queue { kLoad, kStore, kMatrixLoad, kMatrix, kMatrixOut, kVector, kForward };
  virtual ~ChunkSink() = default;
  virtual int next_id() const = 0;
  // Work of `cycles` device cycles on a compute queue (kMatrix, kVector).
  virtual int compute(int core, Queue q, double cycles, std::vector<int> deps, std::string label) = 0;
  // A move of `bytes`: kLoad / kStore to or from global memory, kMatrixLoad / kMatrixOut / kForward on chip.
  virtual int move(int core, Queue q, double bytes, std::vector<int> deps, std::string label) = 0;
  // Back-pressure: the last task of the chunk lowered `back` chunks before the next one on `core` (-1: none
  // that far back, or a sink that does not track chunks), and the end of a chunk.
  virtual int chunk_end_before(int core, int back) {
    (void)core, (void)back;
    return -1;
  }
  virtual void chunk_end(int core, int last) { (void)core, (void)last; }
  // A task on `core` that ends when all of `deps` have (no work of its own), or -1 where not needed.
  virtual int join(int core, std::vector<int> deps) {
    (void)core, (void)deps;
    return -1;
  }
  // A tensor's presence in an on-chip memory of `core` from the start of task `first` to the end of `last`.
  virtual void occupy(int core, const std::string& memory, int64_t bytes, int first, int last) {
    (void)core, (void)memory, (void)bytes, (void)first, (void)last;
  }
  // What the lowering moved and computed.
  // macs: algebraic (OpNode::macs); executed_macs: as the matrix unit runs them on whole blocks;
  // spill_store: the spill stores alone (spill counts stores and reloads); forward: bytes moved from the
  // vector memory into the matrix unit's; cast: elements cast to the operand size for the matrix unit.
  struct Counts {
    double l1_to_l0 = 0, l0c_to_ub = 0, macs = 0, executed_macs = 0, spill = 0, spill_store = 0, forward = 0, cast = 0;
  } counts;
};

// What the matrix unit's operand buffers (L0A / L0B) hold between its operations within a chunk: the last
// left and right operand (tensor and orientation), kept when it fits in half its buffer (the other half
// takes the next load, L0 ping-pong). An operation whose operand is still there does not load it again
// (GEMM-first's K S then Q S share S; K K^T then Q K^T share K^T); where neither operand fits its buffer,
// the right one is streamed again for every further tile of the left. Devices that name no operand
// buffers load every operand every time.
struct L0Residency {
  struct Slot {
    int tensor = -1;
    bool trans = false;
    bool operator==(const Slot&) const = default;
  };
  Slot left, right;
  // L1 -> L0 bytes of matrix operation `o` given what is resident; updates the residency.
  double load_bytes(const plan::Graph& g, const plan::Device& d, const plan::OpNode& o);
  // Tensor t was written: a copy in the buffers is stale.
  void forget(int t) {
    if (left.tensor == t) left = {};
    if (right.tensor == t) right = {};
  }
};

// One plan's chunk on the device: emits the tasks of one chunk of one head (or head slice) on a core.
class ChunkLowering {
 public:
  ChunkLowering(const plan::Plan& pl, const plan::Device& d, SpillPlan spills)
      : pl_(pl), g_(pl.graph), d_(d), cm_(d_), spills_(std::move(spills)) {
    for (int t = 0; t < static_cast<int>(g_.tensors.size()); ++t) {
      if (g_.tensors[t].role == plan::Role::kOutput) out_t_ = t;
    }
  }

  const plan::Graph& graph() const { return g_; }
  int64_t bytes(int t) const { return plan::tensor_bytes(g_, t, d_); }
  const SpillPlan& spills() const { return spills_; }

  // The ops of the kernels in `mask` of one chunk on `core`. `have` maps tensor -> the task that made it
  // available on this core (the incoming state, -1 when it is zero); tensors the ops read and `have`
  // lacks are loaded from global memory. Produced tensors are added to `have`; the output, and with
  // `store_handoffs` those a kernel outside `mask` reads, are stored. Every task depends on `gate`.
  void chunk(ChunkSink& em, int core, KernelMask mask, std::map<int, int>& have, int gate,
             bool store_handoffs = true) const;

  // `count` consecutive chunks of one head on `core`, the state carried from each to the next, starting
  // from the task that made `state` available (-1: a zero state). Returns the task of the last S'.
  int chain(ChunkSink& em, int core, KernelMask mask, int64_t count, int state, int gate,
            bool store_handoffs = true) const {
    for (int64_t c = 0; c < count; ++c) {
      std::map<int, int> have;
      have[g_.state_in] = state;
      chunk(em, core, mask, have, gate, store_handoffs);
      state = have[g_.state_out];
    }
    return state;
  }

  // A head (or head slice) run through all its chunks on `core`, state on chip; the final state is stored.
  void head(ChunkSink& em, int core, int64_t chunks, int gate) const {
    const int state = chain(em, core, kAllKernels, chunks, -1, gate);
    em.move(core, ChunkSink::Queue::kStore, static_cast<double>(bytes(g_.state_out)), {state}, "final state");
  }

 private:
  bool read_outside(int t, KernelMask mask) const {
    for (int c : g_.consumers(t)) {
      if (!((mask >> g_.ops[c].kernel) & 1u)) return true;
    }
    // S' becomes the next chunk's S: stored when a kernel outside the mask reads S.
    if (t == g_.state_out) {
      for (int c : g_.consumers(g_.state_in)) {
        if (!((mask >> g_.ops[c].kernel) & 1u)) return true;
      }
    }
    return false;
  }

  // The tasks that bring t into the matrix unit's operand memory after `ready` (the task that made it
  // available), or `ready` itself when nothing is needed. `loaded`: t came from global memory.
  int to_operand_memory(ChunkSink& em, int core, int t, int ready, bool loaded, int gate) const;

  const plan::Plan& pl_;
  const plan::Graph& g_;
  plan::Device d_;  // the device as lowered for (its load slots as make_lowering chose them)
  plan::DeviceCostModel cm_;
  SpillPlan spills_;
  int out_t_ = -1;
};

// The lowering of `pl`'s chunk with the spills its buffers need on `d`. Loads are double-buffered
// (Device::load_slots) where that fits: when the plan spills with the device's slots and fits its buffers
// with one, it is lowered single-buffered (a kernel writer's choice: no prefetch rather than spills).
Status make_lowering(const plan::Plan& pl, const plan::Device& d, std::unique_ptr<ChunkLowering>* out);

}  // namespace hanpu::sim
