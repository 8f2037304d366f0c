// One lowering of a plan's chunk onto engine queues, shared by the NPU model (sim/lower.cpp) and the
// fusion runtime's GDN/KDA tasks (fuse/task.cpp): a matrix step is an operand load into the matrix unit
// (at the L1->L0 rate), the matrix computation, and the result's move out (at the L0C->UB rate); a vector
// step runs on the vector unit; a layout transform before a step is vector work of the cost model's
// transform cycles. Cycles come from the planner's cost model, so the simulator and the planner agree on
// every operator's cost. Chunk inputs are loaded from global memory and outputs stored; spilled tensors
// (sim/spill.h) are stored and reloaded through the same paths. Where the work lands is the sink's
// business: the model's per-core engine queues, or a fusion task's stages.
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
  enum class Queue { kLoad, kStore, kMatrixLoad, kMatrix, kMatrixOut, kVector };
  virtual ~ChunkSink() = default;
  virtual int next_id() const = 0;
  // Work of `cycles` device cycles on a compute queue (kMatrix, kVector).
  virtual int compute(int core, Queue q, double cycles, std::vector<int> deps, std::string label) = 0;
  // A move of `bytes`: kLoad / kStore to or from global memory, kMatrixLoad / kMatrixOut on chip.
  virtual int move(int core, Queue q, double bytes, std::vector<int> deps, std::string label) = 0;
  // A tensor's presence in an on-chip memory of `core` from the start of task `first` to the end of `last`.
  virtual void occupy(int core, const std::string& memory, int64_t bytes, int first, int last) {
    (void)core, (void)memory, (void)bytes, (void)first, (void)last;
  }
  // What the lowering moved and computed.
  // macs: algebraic (OpNode::macs); executed_macs: as the matrix unit runs them on whole blocks;
  // spill_store: the spill stores alone (spill counts stores and reloads).
  struct Counts {
    double l1_to_l0 = 0, l0c_to_ub = 0, macs = 0, executed_macs = 0, spill = 0, spill_store = 0;
  } counts;
};

// One plan's chunk on the device: emits the tasks of one chunk of one head (or head slice) on a core.
class ChunkLowering {
 public:
  ChunkLowering(const plan::Plan& pl, const plan::Device& d, SpillPlan spills)
      : pl_(pl), g_(pl.graph), d_(d), cm_(d), spills_(std::move(spills)) {
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

  const plan::Plan& pl_;
  const plan::Graph& g_;
  const plan::Device& d_;
  plan::DeviceCostModel cm_;
  SpillPlan spills_;
  int out_t_ = -1;
};

// The lowering of `pl`'s chunk with the spills its buffers need on `d`.
Status make_lowering(const plan::Plan& pl, const plan::Device& d, std::unique_ptr<ChunkLowering>* out);

}  // namespace hanpu::sim
