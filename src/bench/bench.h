// `hanpu bench`: the engine's strategies timed side by side in one process, with executed GFLOP/s,
// utilisation against the FMA peak measured in the same run, workspace, traffic and accuracy.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hanpu/engine.h"

namespace hanpu {

// Model shapes: q/k heads H, value heads HV, head dims K, V of one linear-attention layer.
// qwen3.5-2b (the model of the HA-NPU calibration figures): 16 key and 16 value heads of 128, hidden 2048,
// 24 layers of which 18 linear (Qwen/Qwen3.5-2B config.json, as its fields are recorded in
// p-doom/omegalax omegalax/models/qwen3_5/config.py, spec "qwen3.5-2b", and in a Qwen3.5-2B config test
// of a third-party HF mapper found through the code index: linear_num_key_heads 16,
// linear_num_value_heads 16, linear_key/value_head_dim 128, full_attention_interval 4).
struct Preset {
  const char* name;
  Kind kind;
  int64_t H, HV, K, V;
};
const std::vector<Preset>& bench_presets();

struct BenchConfig;
// The ablation: the planner's ladder (plan/strategy.h): fla, then the hanpu techniques added one at a
// time, cumulatively: head-level fusion, + tail splitting, + chunk-first order, + GEMM-first order,
// + layout planning (the layout DP on the host description instead of the fixed row-major layouts).
// In bf16 precision it is the packing ablation instead (plan/packing.h): the hanpu strategy with its GEMMs'
// right operands packed by every GEMM call (pack-always), by every product (never-keep), and as the layout
// DP plans it (planned), each with the planner's estimate beside the measurement. `mode`: the bench's one
// precision mode, resolved (bench_precision_modes).
Status ablation_steps(Precision mode, std::vector<std::pair<std::string, EngineConfig>>* steps);

struct BenchConfig {
  std::string preset = "qwen3.5-0.8b";
  Kind kind = Kind::kGdn;
  int64_t H = 16, HV = 16, K = 128, V = 128;
  std::vector<int64_t> tokens = {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  std::vector<std::string> strategies = {"native", "fla", "fla-megakernel", "flashqla", "hanpu"};
  bool ablation = false;  // run ablation_steps() instead of `strategies`
  std::shared_ptr<const plan::Plan> plan;  // run instead of the strategies when set (hanpu bench --plan FILE)
  bool decode = false;    // per-step latency of one decode token for batches of 1..64 sequences instead
  std::vector<int64_t> decode_batches = {1, 2, 4, 8, 16, 32, 64};
  // Instead of prefill runs: one (chunk, head) step of the hanpu strategy timed by part in cache, on one
  // thread, 100 x reps times (bench/parts_bench.h).
  bool parts = false;
  int threads = 0;
  DType dtype = DType::kF32;
  // Options::precision of the prefill runs: each strategy runs once in every mode these resolve to on `dtype`
  // (exact or bf16; a repeat dropped), all interleaved round by round, and a bf16 record beside an exact one of
  // the same strategy and length gets its speedup; --parts takes turns by rounds of 100 steps the same way.
  // --decode and --ablation take one mode.
  std::vector<Precision> precisions = {Precision::kAuto};
  bool breakdown = false;  // one extra hanpu run per length with its chunk steps timed by kind
  int reps = 5;
  uint64_t seed = 1;
};

struct BenchRecord {
  std::string kind, preset, strategy, dtype, simd_target;
  int64_t tokens = 0;
  int64_t batch = 0;  // decode records: sequences decoded per step (0 for prefill records)
  int threads = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0, gflops = 0, utilization = 0;
  int64_t peak_workspace_bytes = 0, traffic_bytes = 0;
  double flops = 0, nmse_o = 0, nmse_state = 0;
  std::string precision;  // the mode the run resolved to: "exact" or "bf16"
  // FLA's metric ||x - ref|| / ||ref|| against the fp64 reference (value head 0), and the floor of o: the
  // relative RMS of the reference merely rounded to bf16 (the bf16 mode's bar is 1.5x of it).
  double rel_rms_o = 0, rel_rms_state = 0, bf16_floor_o = 0;
  // bf16 runs: the same for FLA's half-precision dataflow emulated on value head 0 (ops/fla_emulation.h).
  double fla_rel_rms_o = 0, fla_rel_rms_state = 0;
  // bf16 records with an exact record of the same strategy and length in the run: the exact run's time over
  // this one's, the median of the per-round ratios of the interleaved repetitions, and their least and most;
  // NaN elsewhere.
  double speedup_vs_exact = NAN, speedup_vs_exact_min = NAN, speedup_vs_exact_max = NAN;
  double matrix_utilization = 0;  // gflops / matrix_peak_gflops
  // The packing ablation's records: thread time per (chunk, head) step (median_ms x threads / steps) and
  // the planner's estimate of one step (its per-chunk cost on the host description and the rows' trip from
  // memory, plan::step_memory_cycles); NaN elsewhere.
  double step_us = NAN, estimate_step_us = NAN;
  // With BenchConfig::breakdown (hanpu strategy records): ms per kind of chunk step, summed over threads,
  // from one extra run (RunStats::breakdown_ms), and the (chunk, head slice) steps it ran.
  std::vector<std::pair<std::string, double>> breakdown_ms;
  int64_t chunk_steps = 0;
  // Beside it, the planner's estimate of one step by the same parts (us): the host chunk plan of the run
  // (plan::op_cycles, each operator in its part, and plan::step_memory_cycles as the prefetch part; --parts:
  // a step's own parts only); empty where the run's plan is not that (the exact
  // ablation's earlier steps, column-sliced heads, a --plan for another device).
  std::vector<std::pair<std::string, double>> model_breakdown_us;
  // BenchConfig::parts records: each part's median and least time over the in-cache steps (us; the step's
  // own are median_ms and min_ms), and the steps timed.
  std::vector<std::pair<std::string, double>> parts_us, parts_min_us;
  int64_t parts_steps = 0;
};

struct BenchReport {
  double fma_peak_gflops = 0;
  // The peak of the unit the bf16 mode's GEMMs run on, measured in the same run (the bf16 dot product of
  // the kernel set, or the fp32 FMA peak where it has none), and that unit's name.
  double matrix_peak_gflops = 0;
  std::string matrix_unit;
  // The mode precision auto runs bf16 inputs in here ("bf16" or "exact": ops.h resolve_precision).
  std::string auto_bf16_mode;
  // Whether this process may run AMX tiles, and why not (kernels/amx_support.h).
  bool amx_usable = false;
  std::string amx_reason;
  // The host description the planner's estimates use: this machine's, written by `hanpu calibrate`
  // (plan::calibrated_host_path()), or the shipped default, whose costs are estimates for no particular CPU.
  bool host_calibrated = false;
  // Why a calibration at that path was set aside for the shipped default (plan::load_host_device), or empty.
  std::string host_note;
  // One core's fp32 FMA peak while `hanpu calibrate` measured (plan::Device::calibration_fma_peak_gflops), and
  // this run's per thread over it: the estimates assume the machine's speed then (0: not known).
  double calibration_fma_peak_gflops = 0;
  double peak_vs_calibration = 0;
  std::vector<BenchRecord> records;
};

// The median of `v` (the mean of the middle two for an even count).
double percentile_median(std::vector<double> v);

// The modes cfg.precisions resolve to on cfg.dtype (Precision::kExact or kBf16), in the order given, each once;
// an error for an empty list, or several modes where the bench runs one (--decode, --ablation).
Status bench_precision_modes(const BenchConfig& cfg, std::vector<Precision>* out);

// Runs the benchmark; `progress` gets one line per finished measurement.
Status run_bench(const BenchConfig& cfg, const std::function<void(const std::string&)>& progress, BenchReport* out);

std::string format_bench_table(const BenchReport& rep);
// The report's AMX line: usable, or why not.
std::string amx_line(const BenchReport& rep);
std::string format_bench_json(const BenchReport& rep, const BenchConfig& cfg);

}  // namespace hanpu
