// The host's overlap curve (`hanpu fuse --device host --probe`): on one core, the matrix lane's instruction
// stream alone, a vector stream alone (FMA rounds, exp rounds as in a softmax, or load-FMA-store rounds on an
// L1 buffer as in a row pass), and both interleaved in one stream at several ratios (vector rounds per matrix
// step), with the matrix instructions' operands in registers or loaded every step from L1 or from L2 (a
// GEMM's tile loads). The overlap of a point is
//   (t_matrix + t_vector - t_both) / min(t_matrix, t_vector)
// 1 when the shorter stream is wholly hidden behind the longer one, 0 when the two run one after the other
// (negative when interleaving costs extra). Every time is a median of interleaved repetitions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hanpu/status.h"
#include "kernels/overlap_probe.h"

namespace hanpu::fuse {

struct ProbePoint {
  ProbeOperands operands = ProbeOperands::kRegisters;
  ProbeVector kind = ProbeVector::kFma;
  int rounds = 0;
  double matrix_us = 0, vector_us = 0, both_us = 0, overlap = 0;
};

struct ProbeResult {
  ProbeLane lane = ProbeLane::kNone;
  std::string lane_name;      // e.g. "AVX512-BF16 dot products (VDPBF16PS)"
  bool matrix_engine = false; // a matrix engine beside the vector unit (AMX); false: the lane is the vector unit
  int cpu = -1;               // the core it ran on (-1: not pinned)
  int64_t steps = 0;
  double matrix_gflops = 0;   // the matrix stream alone with operands in registers, median over its points
  std::vector<ProbePoint> points;
};

// (t_matrix + t_vector - t_both) / min(t_matrix, t_vector).
double overlap_fraction(double t_matrix, double t_vector, double t_both);

const char* probe_vector_name(ProbeVector v);      // "fma", "exp", "memory"
const char* probe_operands_name(ProbeOperands o);  // "registers", "L1", "L2"

// Runs the probe for each operand source, each vector kind and each entry of `rounds` (each >= 1), `reps` (>= 1) interleaved
// repetitions per stream, pinned to the calling thread's current core; `progress` gets one line per point.
// An error when this CPU has no lane to probe (no AVX-512) or an argument is out of range.
Status run_overlap_probe(int reps, const std::vector<int>& rounds, int64_t steps,
                         const std::function<void(const std::string&)>& progress, ProbeResult* out);

// The same question asked of real kernels (`hanpu fuse --device host --probe` prints it after the curve):
// the kernel registry's bf16 GEMM on the slices the host GEMM task's products run (kPairSliceRows x 128 x
// 128 from fp32 rows of A, B packed once; the task's 32-row slices) and the registry's exp over
// kPairExpFloats values a slice from a buffer that stays in L2, run
//   alone        the slices' GEMMs, then the slices' exps (each stream by itself);
//   alternated   slice by slice, a GEMM then its exp (group 4's executor schedule);
//   carried      the exp inside the GEMM, `floats` values after each tile step
//                (simd::gemm_packed_bf16_carrying: instruction-level interleaving, the notes' software
//                pipelining at the finest grain), the rest after the slice.
// Overlaps as above, of the alternated and carried times against the two streams alone. On a set without
// a matrix engine nothing is carried (the exp runs after each slice) and `carries` is false.
inline constexpr int64_t kPairSliceRows = 32, kPairExpFloats = 2048;

struct PairPoint {
  int64_t floats = 0;  // exp values carried per tile step
  double carried_us = 0, overlap = 0;
};

struct KernelPairResult {
  std::string kernel_set;  // the registry's set in use
  bool carries = false;    // its GEMM carries vector work between tile steps (a matrix engine)
  int64_t slices = 0;
  double gemm_us = 0, exp_us = 0, alternated_us = 0, alternated_overlap = 0;
  std::vector<PairPoint> points;
};

// Runs the kernel pair over `slices` (>= 1) slices, `reps` (>= 1) interleaved repetitions, for each entry of
// `floats` (each >= 1); `progress` gets one line per point.
Status run_kernel_pair_probe(int reps, int64_t slices, const std::vector<int64_t>& floats,
                             const std::function<void(const std::string&)>& progress, KernelPairResult* out);

}  // namespace hanpu::fuse
