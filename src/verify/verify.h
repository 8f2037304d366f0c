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
  // Pass if every o value <= bar_o and every state value <= bar_s (in bf16 mode: kBf16GrossFactor^2 times
  // them, and the bars hold pooled over the scenario; below); the recurrent path (no GEMMs, exact in every
  // mode) against the exact bars rec_bar_o / rec_bar_s.
  double bar_o = 0, bar_s = 0, rec_bar_o = 0, rec_bar_s = 0;
  int64_t n_o = 0, n_s = 0;  // values compared: of o and of the final state
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

// Where the bf16 bars hold: on every scenario (the words), pooled over the scenario's instances, with
// each instance held alone to kBf16GrossFactor times its bars (relative RMS), a guard against gross errors.
// Pooled: for o and for the state, sum_i n_i e_i <= sum_i n_i b_i over the group's bf16 instances, e_i the
// worse NMSE of the chunk path and the engine's strategies, b_i its bar, n_i the values compared: the mean
// squared relative error per value within the mean bar per value. Why not each instance alone: the relative
// RMS of one small output is a few draws of the rounding error, and where those come from cancelling terms it
// is large in every bf16 dataflow, so one instance's error against one draw of FLA's emulation is noise. Seed
// 11's instance 625 (GDN, K = V = 1, C = 16: a single state value) measures 1.2e-4 in FLA's dataflow at C = 16
// against 4.0e-3 and 4.1e-3 at C = 32 and 64, 1.7e-3 in the chunk path and 1.1e-2 in the hanpu strategy (its
// update rounds the decayed V' once per value where FLA rounds both operands; an fp64 emulation of those
// roundings gives the same 1.1e-2). Over seeds 1-48 (34,560 instances, `hanpu verify --instances 720 --seed S
// --precision bf16`, AMD EPYC Zen 5) five instances were over their own bars: states of 1, 4, 60, 128 and 768
// values, 1.04-1.11x and 4.48x for the single value; of the 3,456 scenario groups, the largest pooled ratio
// is 0.79 (NMSE; 0.89 in relative RMS), the median 0.65.
inline constexpr double kBf16GrossFactor = 8.0;
struct PooledRatio {
  double o = 0, state = 0;  // sum n e / sum n b (0 for a group without bf16 instances)
  bool passed() const { return o <= 1.0 && state <= 1.0; }
};
// Over the bf16 instances of `group` that no path rejected (a rejection fails its instance already).
PooledRatio pooled_ratio(const std::vector<const InstanceResult*>& group);

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
  int failures = 0;  // instances
  // The scenario groups (kind, dtype, scenario) over their pooled bf16 bars, each as
  // "gdn/BF16/varlen: pooled o 1.23x, state 0.80x its bars (NMSE)".
  std::vector<std::string> failed_groups;
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
