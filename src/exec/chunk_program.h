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
// rejected.
#pragma once

#include <string>
#include <vector>

#include "hanpu/status.h"
#include "plan/graph.h"

namespace hanpu {

enum class StateOp {
  kKe,        // Ke = diag(e^G) K                         (GEMM-first)
  kKS,        // KS = Ke S
  kQs,        // Qs = scale diag(e^G) Q
  kQS,        // QS = Qs S
  kR,         // R = diag(beta) (V - KS)
  kVnFromTR,  // V' = T R
  kKb,        // Kb = diag(beta e^G) K                    (FLA order)
  kW,         // W = T Kb
  kVb,        // Vb = diag(beta) V
  kU,         // U = T Vb
  kWS,        // WS = W S
  kVnFromUWS, // V' = U - WS
  kPV,        // PV = P V'
  kO,         // O = QS + PV, stored
  kKd,        // Kd = diag(e^{G_last - G}) K
  kKtV,       // S' = diag(e^{G_last}) S + Kd^T V' (the update: KtV and S' run fused, at the KtV step)
  kUpdate,    // the S' step: marks the update done (its arithmetic ran at kKtV)
};

struct ChunkProgram {
  std::vector<StateOp> ops;  // the plan's state-dependent steps, in its order
  bool packed_update = false;  // KtV's operand from a packed panel (the plan's layout of KtV: blocked)
  bool in_place = true;        // every read of S precedes the update: S' overwrites S
  std::string describe() const;  // e.g. "Ke KS Qs QS R V'=TR PV O Kd KtV S' (packed, in place)"
};

// Compiles the plan graph's steps; errors name a step the engine cannot run or a missing step.
Status compile_chunk_program(const plan::Graph& g, const std::vector<plan::Layout>& op_layout, ChunkProgram* out);

}  // namespace hanpu
