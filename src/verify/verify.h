// `hanpu verify`: random instances over the whole operator contract, each run through the fp64
// reference, the chunkwise prefill and the recurrent path, with NMSE against the accuracy bars.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "verify/instances.h"

namespace hanpu {

// NMSE = sum (y - ref)^2 / sum ref^2; +inf when y has a non-finite entry; the plain sum of squares when
// ref is all zero.
double nmse(const std::vector<double>& y, const std::vector<double>& ref);

struct InstanceResult {
  int index = 0;
  std::string scenario, kind, dtype, shape;
  // NMSE of chunk vs reference, recurrent vs reference, chunk vs recurrent: for o and final state.
  double chunk_o = 0, chunk_s = 0, rec_o = 0, rec_s = 0, cvr_o = 0, cvr_s = 0;
  // Worst NMSE vs the reference over the engine's strategies (when they ran), and which one it was.
  double engine_o = 0, engine_s = 0;
  std::string engine_worst;
  // NMSE of the hanpu strategy (the library's default path) alone, reported beside the worst strategy's: in
  // bf16 mode it reads R, P and V' as two-term splits (plan/packing.h), the baselines FLA's roundings.
  double hanpu_o = 0, hanpu_s = 0;
  // Pass if every o value <= bar_o and every state value <= bar_s; the recurrent path (no GEMMs, exact in
  // every mode) against the exact bars rec_bar_o / rec_bar_s.
  double bar_o = 0, bar_s = 0, rec_bar_o = 0, rec_bar_s = 0;
  std::string precision;  // the mode the chunk and engine paths ran at: "exact" or "bf16"
  double fla_o = 0, fla_s = 0;  // bf16: NMSE of the FLA half-precision emulation's o and final state
  double seconds = 0;
  bool passed = false;
  std::string error;  // a Status message when a path rejected the instance (a failure)
};

// The NMSE an output of `inst` may reach against its fp64 reference `ref` when written in `out_dtype`:
// fp32 inputs 1e-10 (1e-8 for KDA with -1000 gates); half inputs twice the NMSE of the reference rounded
// to out_dtype, plus the same absolute term.
double accuracy_bar(const Instance& inst, const std::vector<double>& ref, DType out_dtype);

// The bars of the bf16 precision mode, in FLA's relative RMS metric (NMSE is its square). An output passes
// if it meets the fixed bar or is no worse than FLA's own half-precision dataflow on the same inputs
// (ops/fla_emulation.h), within a margin for the sampling noise of a relative RMS over n values:
//   o:     max(1.5 x the relative RMS of the fp64 result rounded to bf16 (4e-3 for f16 or f32 inputs, whose
//          own rounding to bf16 operands is part of the error), margin(n) x the emulation's);
//   state: max(2.5e-3 (4e-3 for f16 or f32 inputs), margin(n) x the emulation's);
//   margin(n) = 1.1 + 8 / sqrt(n) (the errors of one instance are correlated: fewer than n independent samples).
double bf16_margin(std::size_t n);
double accuracy_bar_bf16_o(const Instance& inst, const std::vector<double>& ref, double fla_o_nmse);
double accuracy_bar_bf16_state(const Instance& inst, std::size_t n, double fla_s_nmse);

// Runs one instance through the reference, chunk and recurrent paths and, with `engine`, through every
// strategy of the CPU engine (2 threads), at the instance's precision (inst.opt.precision).
InstanceResult run_instance(const Instance& inst, bool engine = false);

struct VerifyConfig {
  int instances = 360;
  uint64_t seed = 1;
  int threads = 0;  // 0: hardware concurrency
  bool engine = true;  // also check every engine strategy
  Precision precision = Precision::kAuto;  // of every instance (auto: resolve_precision per instance)
};

struct VerifyReport {
  std::vector<InstanceResult> results;
  int failures = 0;
  double seconds = 0;
};

// Runs instances 0..n-1 of the seed on a few worker threads; `progress` (may be empty) is called once
// per finished instance, from one thread at a time.
VerifyReport run_verify(const VerifyConfig& cfg, const std::function<void(const InstanceResult&, int done)>& progress);

// Human-readable table grouped by kind / dtype / scenario (max and median NMSE per column).
std::string format_table(const VerifyReport& rep);
// The same groups plus every instance, as JSON text.
std::string format_json(const VerifyReport& rep, const VerifyConfig& cfg);

}  // namespace hanpu
