// The CPU engine: the operators of ops.h run multi-threaded with SIMD kernels under one of several
// dataflow strategies. All strategies share the same kernels and differ only in dataflow, so comparing
// them measures the dataflow (DESIGN.md §2). Every strategy computes what chunk_forward computes and is
// tested against the fp64 reference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hanpu/ops.h"

namespace hanpu {

namespace plan {
struct Plan;  // an execution plan: an opaque handle here, made by load_plan or by the planner (src/plan/plan.h)
// bf16 mode: where the GEMMs' right operands are packed (src/plan/packing.h): kPlanned (the layout DP, 0),
// kNeverKeep, kPackAlways (the ablation's fixed choices).
enum class Packing : int;
}

// Reads and validates an execution plan file (schema hanpu-plan/2); errors name the field.
Status load_plan(const std::string& path, std::shared_ptr<const plan::Plan>* out);

enum class Strategy {
  kNative,         // one pass per operator over the whole tensor, every intermediate in a full-size buffer
  kFla,            // chunk-head-chunk: #1-#4 over (head, chunk) -> W, U in memory; #5 over heads -> every
                   // chunk's state and V' in memory; #6 over (head, chunk); three launches
  kFlaMegakernel,  // the fla dataflow inside one parallel region, barriers between the phases
  kFlashQla,       // chunk-seg-seg: FlashQLA's segment-parallel state passing (warm-up from a zero state,
                   // exact transition-matrix fallback, serial correction), then a fused pass per segment
  kHanpu,          // head-level mapping with cross-operator fusion, plus the switchable techniques below
};
const char* strategy_name(Strategy s);
const std::vector<Strategy>& all_strategies();
bool parse_strategy(const std::string& name, Strategy* out);

struct EngineConfig {
  Strategy strategy = Strategy::kHanpu;
  int threads = 0;  // 0: every CPU this process may use
  // Techniques of the hanpu strategy (ignored by the baselines), each switchable for the ablation:
  bool tail_split = true;   // split leftover heads column-wise along V over idle threads
  bool chunk_first = true;  // update the state in place after its last read (else old and new co-reside)
  bool gemm_first = true;   // K S, Q S, K K^T, Q K^T first; V' = T diag(beta) (V - diag(exp G) K S)
  // Extreme tails (at most half the threads would get a head slice): prepare chunks in parallel over all
  // threads, then run each head's state-dependent part; bit-identical to the normal path.
  bool chunk_parallel_fallback = true;
  // Operand layout of the state update S += (K o e^{G_last - G})^T V' (the engine's packed vs row-major
  // choice, fixed until the layout planner decides it): false reads the transposed operand in place
  // (row-major), true packs it into a [K, L] panel first.
  bool packed_operands = false;
  // Layouts from the planner's layout DP on the host description instead of the fixed row-major ones
  // (the last step of the ablation). Exact mode only: bf16 calls plan their packed operands (below).
  bool layout_plan = false;
  // bf16 mode: the packing of the GEMMs' right operands — planned by the layout DP on the host's bf16 unit
  // (value-initialised: kPlanned), or a fixed choice for the ablation (`hanpu bench --ablation --precision
  // bf16`). Every choice gives the same bits.
  plan::Packing packing{};
  // flashqla: chunks per segment (0: FlashQLA's rule) and the log decay that ends a warm-up (FlashQLA
  // uses -10; -25 keeps the dropped terms below the fp32 accuracy bar).
  int64_t segment_chunks = 0;
  double flashqla_log_threshold = -25.0;
  // Run this execution plan (src/plan/plan.h, `hanpu plan --json`; load it with hanpu::load_plan): its
  // strategy, mapping, chunk steps and layouts. Its kind, chunk size, K, V, sequence lengths and value heads
  // must be the problem's, and threads 0 or its worker count. Without one, the engine plans the call from
  // the switches above on the host description.
  std::shared_ptr<const plan::Plan> plan;
  // Time the hanpu strategy's chunk steps by kind (RunStats::breakdown_ms); a clock read per step.
  bool breakdown = false;
};

// What a run did, counted as it ran.
struct RunStats {
  double flops = 0;                  // executed: GEMM tiles as issued (2 M N K) and the triangular inverse
  int64_t peak_workspace_bytes = 0;  // every allocation beyond inputs and outputs, at its peak
  int64_t traffic_bytes = 0;         // inputs + outputs + bytes written to and read back from intermediates
  int threads = 0;
  std::string simd_target;           // Highway target of the kernels, e.g. "AVX3"
  std::string dataflow;              // what ran: the strategy's name, or the hanpu extreme-tail fallback
  std::string chunk_program;         // hanpu: the chunk steps it ran, in order (exec/chunk_program.h)
  // With EngineConfig::breakdown, the hanpu strategy: milliseconds summed over threads per kind of step
  // ("load": input rows and gate factors; "scores": K K^T, Q K^T and their masks; "inverse": T;
  // "gemm": the state-dependent GEMMs; "vector": scalings and residuals; "store": o), and the number of
  // (chunk, head slice) steps they cover.
  std::vector<std::pair<std::string, double>> breakdown_ms;
  int64_t chunk_steps = 0;
};

// Chunkwise prefill (the options of chunk_forward) on the engine. Outputs as for chunk_forward.
Status engine_forward(const Inputs& in, const Options& opt, const EngineConfig& cfg, const Outputs& out,
                      RunStats* stats = nullptr);

// Continuous-batching decode on the engine: the semantics of recurrent_decode_slots (ops.h), with the
// SIMD decode kernel and the (sequence, value head) units spread over the threads.
Status engine_decode_slots(const Inputs& in, const Options& opt, const EngineConfig& cfg, const TensorView& state_pool,
                           const TensorView& slot_indices, const TensorView& o, RunStats* stats = nullptr);

}  // namespace hanpu
