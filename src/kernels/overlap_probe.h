// One core's matrix/vector overlap probe (`hanpu fuse --device host --probe`): does the core run matrix
// instructions and vector work at the same time when they are interleaved in one instruction stream?
//
// The matrix lane is the best this CPU has: AMX tiles (TDPBF16PS), a matrix engine beside the vector unit,
// where this process may run them; else AVX512-BF16 dot products or fp32 FMAs, which run on the vector unit
// itself, so on those lanes the probe measures how much the vector unit's own pipes overlap two instruction
// mixes, and says that the matrix engine is absent.
#pragma once

#include <cstdint>

namespace hanpu {

enum class ProbeLane { kNone, kFp32Fma, kBf16Dot, kAmxTile };
// A step's vector work: rounds of 8 register FMAs, of the exp of 2 registers (a softmax's instruction mix),
// or of 8 loads, FMAs and stores on an 8 KiB buffer in L1 (a row pass's: rmsnorm, eltwise, dequant).
enum class ProbeVector { kFma, kExp, kMemory };
// Where a step's matrix instructions take their operands: registers loaded once (the multiplier alone), or
// loaded every step (AMX: four tile loads; the vector lanes: their operand vectors) from a buffer that fits
// L1 (16 KiB) or only L2 (1 MiB, as a GEMM streaming its panels from L2 does).
enum class ProbeOperands { kRegisters, kL1, kL2 };

// Matrix instructions per probe step on independent accumulators: as many as the peak probes use (12 cover
// VDPBF16PS's and FMA's latency at one per cycle; 8 measured 105 of about 200 GFLOP/s on Zen 4; AMX: the four
// C tiles of a 2 x 2 tile block, as the AMX GEMMs run them).
inline constexpr int kProbeMatrixChains = 12;
inline constexpr int kProbeTileChains = 4;
inline int probe_matrix_instructions(ProbeLane lane) {
  return lane == ProbeLane::kAmxTile ? kProbeTileChains : kProbeMatrixChains;
}

// The matrix lane this CPU runs the probe on (kNone: no AVX-512, no probe).
ProbeLane probe_matrix_lane();

// Runs `steps` steps of one instruction stream: probe_matrix_instructions(lane) matrix instructions (when `matrix`)
// on operands from `operands`, then `rounds` rounds of vector work of `kind`. Returns a value computed from
// every chain (so none is optimised away); time it around the call.
double probe_stream(ProbeLane lane, bool matrix, int rounds, ProbeVector kind, int64_t steps,
                    ProbeOperands operands = ProbeOperands::kRegisters);

// Flops of the matrix instructions of `steps` steps on `lane`.
double probe_matrix_flops(ProbeLane lane, int64_t steps);

}  // namespace hanpu
