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

}  // namespace hanpu::fuse
