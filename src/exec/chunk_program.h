// A plan's chunk, as the engine's hanpu strategy runs it (plan/graph.h is the IR, plan/plan.h the plan).
//
// The engine runs a plan's steps in the plan's order. The state-independent steps (#1-#3: gate cumsum
// and decays, the score GEMMs and masks, the inverse T) are one fused routine, run at the chunk's start
// (prepare_chunk: nothing in them reads the state, so where the plan places them changes no result; the
// engine computes KDA's scores with its exact sub-block split rather than the IR's abstract Kp/Kn).
// Every state-dependent step (#4-#6 and the update) is its own operation here, executed in plan order,
// and the plan's layout picks the implementation where the engine has two: the update's GEMM reads its
// operand K o e^{G_last - G} either transposed in place (dense) or from a packed [K, L] panel (blocked).
// Its other GEMMs have no transposed operand, so a row-major operand already is the panel the kernel
// reads, and vector steps run on row-major rows: a plan with blocked vector steps (an NPU plan) is
// rejected. Steps are matched by their op code; check_graph has verified every step's operands against
// the code's signature, so the engine's buffers are exactly the plan's edges.
#pragma once

#include <string>
#include <vector>

#include "hanpu/status.h"
#include "plan/graph.h"
#include "plan/plan.h"

namespace hanpu {

struct ChunkProgram {
  std::vector<plan::OpCode> ops;  // the plan's state-dependent steps, in its order (S' is fused into KtV)
  bool packed_update = false;  // KtV's operand from a packed panel (the plan's layout of KtV: blocked)
  bool in_place = true;        // every read of S precedes the update: S' overwrites S
  // bf16 plans (plan/packing.h): the right operands packed once and kept for their later products — those
  // two or more blocked GEMMs read (S: K S and Q S; K: K K^T and Q K^T; V': P V' and the update) — and
  // whether every GEMM call packs its own (the ablation's pack-always); else each product packs once.
  bool bf16 = false;
  bool keep_state = false, keep_keys = false, keep_vn = false;
  bool repack_row_blocks = false;
  // e.g. "Ke KS Qs QS R V'=TR PV O Kd KtV S' (packed, in place)"; bf16 plans add what they keep packed.
  std::string describe() const;
};

// Compiles the plan's chunk steps; errors name a step the engine cannot run or a missing step.
Status compile_chunk_program(const plan::Graph& g, const std::vector<plan::Layout>& op_layout,
                             const plan::PlanOptions& opt, ChunkProgram* out);

}  // namespace hanpu
