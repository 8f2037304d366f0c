#include "bench/bench.h"

#include "bench/bench_common.h"
#include "bench/parts_bench.h"

#include "plan/strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/strided.h"
#include "exec/calibrate.h"
#include "exec/chunk_kernels.h"
#include "exec/fma_peak.h"
#include "exec/thread_pool.h"
#include "kernels/amx_support.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "ops/fla_emulation.h"
#include "plan/device.h"
#include "plan/plan.h"
#include "verify/verify.h"

namespace hanpu {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The view of value head 0 (and the q/k head it reads) of a [B, T, heads, ...] tensor.
TensorView head0(const TensorView& v) {
  TensorView h = v;
  h.strides.clear();
  for (int d = 0; d < v.rank(); ++d) h.strides.push_back(v.stride(d));
  h.shape[2] = 1;
  return h;
}

}  // namespace

double percentile_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

Status bench_precision_modes(const BenchConfig& cfg, std::vector<Precision>* out) {
  out->clear();
  if (cfg.precisions.empty()) return InvalidArgument("precision: give at least one mode (auto, exact or bf16)");
  for (Precision p : cfg.precisions) {
    const Precision mode = resolve_precision(p, cfg.dtype);
    if (std::find(out->begin(), out->end(), mode) == out->end()) out->push_back(mode);
  }
  if (out->size() > 1 && (cfg.decode || cfg.ablation)) {
    return InvalidArgument(std::string("precision: ") + (cfg.decode ? "--decode" : "--ablation") +
                           " runs one precision mode; these resolve to exact and bf16 on " + dtype_name(cfg.dtype) +
                           " inputs");
  }
  return Status::Ok();
}

Status ablation_steps(Precision mode, std::vector<std::pair<std::string, EngineConfig>>* out) {
  out->clear();
  if (mode == Precision::kBf16) {
    for (plan::Packing p : {plan::Packing::kPackAlways, plan::Packing::kNeverKeep, plan::Packing::kPlanned}) {
      EngineConfig c;
      c.packing = p;
      out->emplace_back(plan::packing_name(p), c);
    }
    return Status::Ok();
  }
  for (const plan::StrategyInfo& step : plan::ablation_ladder()) {
    EngineConfig c;
    if (step.opt.dataflow == plan::Dataflow::kHeadLevel) {
      c.strategy = Strategy::kHanpu;
      c.tail_split = step.opt.tail_split;
      c.chunk_first = step.opt.chunk_first;
      c.gemm_first = step.opt.gemm_first;
      c.layout_plan = step.opt.layout_plan;
    } else if (!parse_strategy(step.name, &c.strategy)) {
      return plan::unknown_strategy(step.name);
    }
    out->emplace_back(step.name, c);
  }
  return Status::Ok();
}

const std::vector<Preset>& bench_presets() {
  static const std::vector<Preset> presets = {
      {"qwen3.5-0.8b", Kind::kGdn, 16, 16, 128, 128},
      {"qwen3.5-2b", Kind::kGdn, 16, 16, 128, 128},
      {"qwen3-next", Kind::kGdn, 16, 32, 128, 128},
      {"kimi-linear", Kind::kKda, 32, 32, 128, 128},
  };
  return presets;
}

namespace {

// One decode step (one token for each of `batch` sequences, state slots updated in place) through
// engine_decode_slots: median over reps after a warm-up.
Status run_decode_bench(const BenchConfig& cfg, int threads, const std::function<void(const std::string&)>& progress,
                        BenchReport* out) {
  const int64_t H = cfg.H, HV = cfg.HV, K = cfg.K, V = cfg.V, w = cfg.kind == Kind::kKda ? K : 1;
  Options opt;
  opt.kind = cfg.kind;
  opt.use_qk_l2norm_in_kernel = true;
  char line[256];
  for (int64_t n : cfg.decode_batches) {
    if (n < 1) return InvalidArgument("decode batch sizes must be >= 1, got " + std::to_string(n));
    std::vector<float> q(n * H * K), k(n * H * K), v(n * HV * V), g(n * HV * w), beta(n * HV), pool(n * HV * K * V);
    fill_uniform(q, cfg.seed, 1.7f);
    fill_uniform(k, cfg.seed + 1, 1.7f);
    fill_uniform(v, cfg.seed + 2, 1.7f);
    fill_uniform(pool, cfg.seed + 5, 0.1f);
    for (float& x : g) x = -0.01f;
    for (float& x : beta) x = 0.5f;
    std::vector<int64_t> slots(n);
    for (int64_t i = 0; i < n; ++i) slots[i] = i;
    Inputs in;
    in.q = TensorView(q.data(), DType::kF32, {n, 1, H, K});
    in.k = TensorView(k.data(), DType::kF32, {n, 1, H, K});
    in.v = TensorView(v.data(), DType::kF32, {n, 1, HV, V});
    in.g = cfg.kind == Kind::kKda ? TensorView(g.data(), DType::kF32, {n, 1, HV, K})
                                  : TensorView(g.data(), DType::kF32, {n, 1, HV});
    in.beta = TensorView(beta.data(), DType::kF32, {n, 1, HV});
    std::vector<float> o(n * HV * V);
    const TensorView pool_v(pool.data(), DType::kF32, {n, HV, K, V}), slots_v(slots.data(), DType::kI64, {n});
    const TensorView o_v(o.data(), DType::kF32, {n, 1, HV, V});
    EngineConfig ec;
    ec.threads = threads;
    RunStats stats;
    HANPU_RETURN_IF_ERROR(engine_decode_slots(in, opt, ec, pool_v, slots_v, o_v, &stats));  // warm-up
    std::vector<double> times;
    for (int r = 0; r < std::max(cfg.reps, 20); ++r) {
      const auto t0 = Clock::now();
      HANPU_RETURN_IF_ERROR(engine_decode_slots(in, opt, ec, pool_v, slots_v, o_v, &stats));
      times.push_back(ms_since(t0));
    }
    BenchRecord rec;
    rec.kind = kind_name(cfg.kind);
    rec.preset = cfg.preset;
    rec.strategy = "decode";
    rec.dtype = "F32";
    rec.tokens = 1;
    rec.batch = n;
    rec.threads = threads;
    rec.simd_target = stats.simd_target;
    rec.peak_workspace_bytes = stats.peak_workspace_bytes;
    rec.median_ms = percentile_median(times);
    rec.min_ms = *std::min_element(times.begin(), times.end());
    rec.max_ms = *std::max_element(times.begin(), times.end());
    rec.flops = stats.flops;  // decay, S^T k, rank-1 update, S^T q: 4 multiply-adds per state entry
    rec.gflops = rec.flops / (rec.median_ms * 1e6);
    rec.utilization = rec.gflops / out->fma_peak_gflops;
    rec.nmse_o = rec.nmse_state = rec.rel_rms_o = rec.rel_rms_state = rec.bf16_floor_o = NAN;  // decode accuracy: tests, verify
    rec.fla_rel_rms_o = rec.fla_rel_rms_state = NAN;
    rec.precision = "exact";
    rec.traffic_bytes = n * HV * K * V * 8 + static_cast<int64_t>((q.size() + k.size() + v.size() + o.size()) * 4);
    std::snprintf(line, sizeof line, "decode %s batch %lld: %.1f us per step", rec.kind.c_str(),
                  static_cast<long long>(n), rec.median_ms * 1e3);
    progress(line);
    out->records.push_back(rec);
  }
  return Status::Ok();
}

// The planner's estimate of one (chunk, head) step of the packing choice (its chunk plan on the host
// description, as the engine plans the call, and the rows' trip from memory) beside the measured thread
// time per step.
Status packing_estimate(const BenchConfig& cfg, plan::Packing packing, int64_t T, int threads, int64_t C,
                        BenchRecord* rec) {
  plan::Device host;
  HANPU_RETURN_IF_ERROR(plan::load_this_host(&host, nullptr));
  plan::Plan pl;
  HANPU_RETURN_IF_ERROR(host_chunk_plan(cfg, host, true, packing, C, &pl));
  rec->estimate_step_us = (pl.layouts.cost + plan::step_memory_cycles(pl, host)) / (pl.clock_ghz * 1e3);
  const double steps = static_cast<double>((T + C - 1) / C * cfg.HV);
  rec->step_us = rec->median_ms * 1e3 * threads / steps;
  return Status::Ok();
}

// One prefill run of the bench: a strategy (or ablation step) in one precision mode.
struct BenchRun {
  std::string label;
  EngineConfig ec;
  Precision mode;  // kExact or kBf16
};

// Each bf16 record whose strategy also ran in exact mode: the exact run's time over its own in every round
// of the interleaved repetitions (the two ran back to back, so the ratio sees one phase of a noisy machine),
// their median, least and most, and a progress line.
void speedups_vs_exact(const std::vector<BenchRun>& runs, const std::vector<std::vector<double>>& times,
                       std::vector<BenchRecord>* recs, const std::function<void(const std::string&)>& progress) {
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].mode != Precision::kBf16) continue;
    for (std::size_t e = 0; e < runs.size(); ++e) {
      if (runs[e].mode != Precision::kExact || runs[e].label != runs[i].label) continue;
      std::vector<double> ratios;
      for (std::size_t r = 0; r < times[i].size(); ++r) ratios.push_back(times[e][r] / times[i][r]);
      set_speedup(ratios, &(*recs)[i], progress);
    }
  }
}

}  // namespace

std::string amx_line(const BenchReport& rep) { return amx_support_line(AmxSupport{rep.amx_usable, rep.amx_reason}); }

Status run_bench(const BenchConfig& cfg, const std::function<void(const std::string&)>& progress, BenchReport* out) {
  *out = BenchReport();
  std::vector<Precision> modes;
  HANPU_RETURN_IF_ERROR(bench_precision_modes(cfg, &modes));
  std::vector<BenchRun> runs;
  if (cfg.ablation) {
    std::vector<std::pair<std::string, EngineConfig>> steps;
    HANPU_RETURN_IF_ERROR(ablation_steps(modes.front(), &steps));
    for (auto& [name, ec] : steps) runs.push_back({name, ec, modes.front()});
  } else {
    for (const std::string& name : cfg.strategies) {
      EngineConfig ec;
      if (cfg.plan) ec.plan = cfg.plan;  // a plan runs its own strategy
      else if (!parse_strategy(name, &ec.strategy)) return plan::unknown_strategy(name);
      for (Precision mode : modes) runs.push_back({name, ec, mode});
    }
  }
  if (cfg.tokens.empty()) return InvalidArgument("tokens: give at least one sequence length");
  for (int64_t t : cfg.tokens) {
    if (t < 1) return InvalidArgument("tokens must be >= 1, got " + std::to_string(t));
  }
  if (cfg.reps < 1) return InvalidArgument("reps must be >= 1, got " + std::to_string(cfg.reps));
  const int64_t Tmax = *std::max_element(cfg.tokens.begin(), cfg.tokens.end());
  if (!cfg.decode && !cfg.parts) {
    // What the longest run holds at once, at least: the fp32 inputs, their copy in cfg.dtype, and o.
    const double per_token = 2.0 * cfg.H * cfg.K + static_cast<double>(cfg.HV) * cfg.V +
                             (cfg.kind == Kind::kKda ? cfg.HV * cfg.K : cfg.HV) + cfg.HV;
    const double bytes = static_cast<double>(Tmax) *
                         (per_token * (4 + dtype_size(cfg.dtype)) + static_cast<double>(cfg.HV) * cfg.V * dtype_size(cfg.dtype));
    HANPU_RETURN_IF_ERROR(check_fits_in_memory(bytes, "tokens " + std::to_string(Tmax) + " (" + std::to_string(cfg.H) +
                                                          " q/k heads, " + std::to_string(cfg.HV) + " value heads)"));
  }
  const int threads = cfg.parts ? 1 : ThreadPool::resolve(cfg.threads);  // --parts times one thread's steps
  out->fma_peak_gflops = measure_fma_peak(threads);
  char line[512];
  std::snprintf(line, sizeof line, "fp32 FMA peak, %d threads, %s: %.1f GFLOP/s", threads, simd::target_name(),
                out->fma_peak_gflops);
  progress(line);
  const KernelSet& ks = active_kernels();
  out->matrix_unit = ks.bf16_peak ? ks.bf16_unit : "fp32 FMA";
  out->matrix_peak_gflops = ks.bf16_peak ? measure_fma_peak(threads, true) : out->fma_peak_gflops;
  // Without a bf16 unit in the active set: the CPU has none, or the registry ranked the best set with one
  // behind this one (AVX3+BF16 on an Intel CPU without usable AMX, kernels/kernel_set.h), or HANPU_KERNELS
  // chose this set over it. (active_kernels() is an entry of kernel_sets(): positions compare.)
  const std::vector<KernelSet>& sets = kernel_sets();
  const auto unit = std::find_if(sets.begin(), sets.end(), [](const KernelSet& k) { return k.bf16_peak != nullptr; });
  std::string why;
  if (!ks.bf16_peak && unit == sets.end()) {
    why = " (no bf16 dot product on this CPU: the bf16 mode rounds operands for fp32 FMA)";
  } else if (!ks.bf16_peak && &*unit > &ks) {
    why = " (the bf16 mode rounds operands for the fp32 FMA: this CPU's " + unit->name +
          " set, slower here, is ranked behind this one; HANPU_KERNELS=" + unit->name + " selects it)";
  } else if (!ks.bf16_peak) {
    why = " (the bf16 mode rounds operands for the fp32 FMA: HANPU_KERNELS chose this set over " + unit->name + ")";
  }
  out->auto_bf16_mode = precision_name(resolve_precision(Precision::kAuto, DType::kBF16));
  std::snprintf(line, sizeof line, "bf16 GEMM unit: %s, peak %.1f GFLOP/s%s; precision auto runs bf16 inputs in %s mode",
                ks.bf16_unit.c_str(), out->matrix_peak_gflops, why.c_str(), out->auto_bf16_mode.c_str());
  progress(line);
  out->amx_usable = amx_support().usable;
  out->amx_reason = amx_support().reason;
  progress(amx_line(*out));
  // Calibrated when the planner's "host" is the description `hanpu calibrate` wrote for this process's kernels.
  plan::Device host;
  out->host_calibrated =
      plan::load_this_host(&host, &out->host_note).ok() && host.origin == plan::calibrated_host_path();
  if (!out->host_note.empty()) progress("note: " + out->host_note);
  if (out->host_calibrated && host.calibration_fma_peak_gflops > 0) {
    out->calibration_fma_peak_gflops = host.calibration_fma_peak_gflops;
    out->peak_vs_calibration = out->fma_peak_gflops / threads / host.calibration_fma_peak_gflops;
    if (!plan::fma_peak_steady(out->peak_vs_calibration)) {
      std::snprintf(line, sizeof line,
                    "note: this run's FMA peak, %.1f GFLOP/s a thread, is %.2fx the %.1f of the calibration: the "
                    "machine runs at another speed than when `hanpu calibrate` measured, and the planner's "
                    "estimates assume that speed",
                    out->fma_peak_gflops / threads, out->peak_vs_calibration, host.calibration_fma_peak_gflops);
      progress(line);
    }
  }
  // Where the dot product has fewer flops per cycle than the FMA (an Intel Xeon without AMX: measured
  // 0.5x), the bf16 mode's GEMMs run slower than the exact mode's: say so beside the numbers.
  if (ks.bf16_peak && out->matrix_peak_gflops < out->fma_peak_gflops) {
    std::snprintf(line, sizeof line,
                  "note: the bf16 GEMM unit's peak is %.2fx the fp32 FMA peak here, so --precision bf16 is not "
                  "expected to be faster than exact on this CPU",
                  out->matrix_peak_gflops / out->fma_peak_gflops);
    progress(line);
  }
  if (cfg.decode) {
    // The decode step reads fp32 inputs and has no GEMMs (exact in every precision mode): say that an option
    // asking otherwise did not change what was timed.
    if (cfg.dtype != DType::kF32 || modes.front() == Precision::kBf16) {
      progress("note: --decode times fp32 inputs, and the decode step has no GEMMs (exact in every precision "
               "mode): --dtype and --precision do not change it");
    }
    return run_decode_bench(cfg, threads, progress, out);
  }
  if (cfg.parts) return run_parts_bench(cfg, progress, out);

  const int64_t H = cfg.H, HV = cfg.HV, K = cfg.K, V = cfg.V;
  // Inputs for the longest run; shorter runs use a prefix (B = 1, so a prefix is contiguous).
  const BenchInputs bi = bench_inputs(cfg, Tmax, H, HV);
  const Tensor tq = to_dtype(bi.q, cfg.dtype, {1, Tmax, H, K}), tk = to_dtype(bi.k, cfg.dtype, {1, Tmax, H, K});
  const Tensor tv = to_dtype(bi.v, cfg.dtype, {1, Tmax, HV, V});
  const Tensor tg = cfg.kind == Kind::kKda ? to_dtype(bi.g, cfg.dtype, {1, Tmax, HV, K}) : to_dtype(bi.g, cfg.dtype, {1, Tmax, HV});
  const Tensor tb = to_dtype(bi.beta, cfg.dtype, {1, Tmax, HV});
  Options opt;
  opt.kind = cfg.kind;
  opt.use_qk_l2norm_in_kernel = true;  // as Qwen3-Next / Qwen3.5 and Kimi Linear call the kernels
  const bool any_bf16 = std::find(modes.begin(), modes.end(), Precision::kBf16) != modes.end();
  const bool packing_ablation = cfg.ablation && any_bf16;

  for (int64_t T : cfg.tokens) {
    auto prefix = [T](const Tensor& t) {
      TensorView v = t.view();
      v.shape[1] = T;
      return v;
    };
    Inputs in;
    in.q = prefix(tq);
    in.k = prefix(tk);
    in.v = prefix(tv);
    in.g = prefix(tg);
    in.beta = prefix(tb);
    // fp64 reference of value head 0 (the accuracy sample).
    Inputs in0 = in;
    in0.q = head0(in.q);
    in0.k = head0(in.k);
    in0.v = head0(in.v);
    in0.g = head0(in.g);
    in0.beta = head0(in.beta);
    Tensor ref_o(DType::kF64, {1, T, 1, V}), ref_s(DType::kF64, {1, 1, K, V});
    HANPU_RETURN_IF_ERROR(reference_forward(in0, opt, Outputs{ref_o.view(), ref_s.view()}));
    const std::vector<double> ro = to_doubles(ref_o.view()), rs = to_doubles(ref_s.view());
    std::vector<double> ro16(ro.size());
    for (std::size_t i = 0; i < ro.size(); ++i) ro16[i] = round_to_dtype(ro[i], DType::kBF16);
    const double floor_o = std::sqrt(nmse(ro16, ro));
    double fla_o = NAN, fla_s = NAN;  // FLA's half-precision dataflow on head 0, the bf16 mode's yardstick
    if (any_bf16) {
      Tensor fo(cfg.dtype, {1, T, 1, V}), fs(DType::kF32, {1, 1, K, V});
      HANPU_RETURN_IF_ERROR(fla_bf16_emulation_forward(in0, opt, Outputs{fo.view(), fs.view()}));
      fla_o = std::sqrt(nmse(to_doubles(fo.view()), ro));
      fla_s = std::sqrt(nmse(to_doubles(fs.view()), rs));
    }
    // Each run's warm-up gives its accuracy (every repetition writes the same bits); the timed repetitions
    // then interleave the runs round by round, so a noisy machine's drift falls on all of them alike and
    // their ratios are measured in one run.
    Tensor o(cfg.dtype, {1, T, HV, V}), st(DType::kF32, {1, HV, K, V});
    const Outputs outs{o.view(), st.view()};
    std::vector<BenchRecord> recs(runs.size());
    std::vector<RunStats> stats(runs.size());
    std::vector<std::vector<double>> times(runs.size());
    const auto opt_of = [&](const BenchRun& run) {
      Options o2 = opt;
      o2.precision = run.mode;
      return o2;
    };
    for (std::size_t i = 0; i < runs.size(); ++i) {
      runs[i].ec.threads = threads;
      HANPU_RETURN_IF_ERROR(engine_forward(in, opt_of(runs[i]), runs[i].ec, outs, &stats[i]));  // warm-up
      BenchRecord& rec = recs[i];
      const std::vector<double> oh = to_doubles(head0(o.view()));
      std::vector<double> sh = to_doubles(st.view());
      sh.resize(K * V);  // value head 0
      rec.nmse_o = nmse(oh, ro);
      rec.nmse_state = nmse(sh, rs);
    }
    for (int r = 0; r < cfg.reps; ++r) {
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto t0 = Clock::now();
        HANPU_RETURN_IF_ERROR(engine_forward(in, opt_of(runs[i]), runs[i].ec, outs, &stats[i]));
        times[i].push_back(ms_since(t0));
      }
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const std::string& label = runs[i].label;
      const EngineConfig& ec = runs[i].ec;
      const bool bf16 = runs[i].mode == Precision::kBf16;
      BenchRecord& rec = recs[i];
      if (cfg.breakdown && stats[i].dataflow == "hanpu") {  // an extra run, its steps timed (not in `times`)
        EngineConfig timed = ec;
        timed.breakdown = true;
        RunStats ts;
        HANPU_RETURN_IF_ERROR(engine_forward(in, opt_of(runs[i]), timed, outs, &ts));
        rec.breakdown_ms = ts.breakdown_ms;
        rec.chunk_steps = ts.chunk_steps;
        // The model's step is a whole head's chunk: only where no head was split into column slices.
        const bool whole_heads = ts.chunk_steps == (T + opt.chunk_size - 1) / opt.chunk_size * cfg.HV;
        if (whole_heads && !(cfg.ablation && !bf16)) {
          HANPU_RETURN_IF_ERROR(step_estimate_by_part(cfg, ec.packing, bf16, opt.chunk_size, /*whole_run=*/true, &rec));
        }
      }
      rec.kind = kind_name(cfg.kind);
      rec.preset = cfg.preset;
      rec.strategy = label;
      rec.dtype = dtype_name(cfg.dtype);
      rec.simd_target = stats[i].simd_target;
      rec.tokens = T;
      rec.threads = threads;
      rec.median_ms = percentile_median(times[i]);
      rec.min_ms = *std::min_element(times[i].begin(), times[i].end());
      rec.max_ms = *std::max_element(times[i].begin(), times[i].end());
      rec.flops = stats[i].flops;
      rec.gflops = stats[i].flops / (rec.median_ms * 1e6);
      rec.utilization = rec.gflops / out->fma_peak_gflops;
      rec.peak_workspace_bytes = stats[i].peak_workspace_bytes;
      rec.traffic_bytes = stats[i].traffic_bytes;
      rec.precision = bf16 ? "bf16" : "exact";
      rec.rel_rms_o = std::sqrt(rec.nmse_o);
      rec.rel_rms_state = std::sqrt(rec.nmse_state);
      rec.bf16_floor_o = floor_o;
      rec.fla_rel_rms_o = bf16 ? fla_o : NAN;
      rec.fla_rel_rms_state = bf16 ? fla_s : NAN;
      rec.matrix_utilization = rec.gflops / (bf16 ? out->matrix_peak_gflops : out->fma_peak_gflops);
      char fla[96] = "";
      if (bf16) std::snprintf(fla, sizeof fla, " (FLA's dataflow: o %.2e = %.2fx, S %.2e)", fla_o, fla_o / floor_o, fla_s);
      std::snprintf(line, sizeof line,
                    "%s %s T=%lld %s %s: %.2f ms (%.1f GFLOP/s, %.0f%% of peak), rel. RMS o %.2e (%.2fx the bf16 "
                    "floor) S %.2e%s",
                    rec.kind.c_str(), rec.preset.c_str(), static_cast<long long>(T), rec.strategy.c_str(),
                    rec.precision.c_str(), rec.median_ms, rec.gflops, 100 * rec.matrix_utilization, rec.rel_rms_o,
                    rec.rel_rms_o / floor_o, rec.rel_rms_state, fla);
      progress(line);
      if (packing_ablation) {
        HANPU_RETURN_IF_ERROR(packing_estimate(cfg, ec.packing, T, threads, opt.chunk_size, &rec));
        std::snprintf(line, sizeof line,
                      "  packing %s: %s; per (chunk, head) step %.2f us measured, %.2f us the planner's estimate "
                      "(measured / estimate %.2f)",
                      label.c_str(), stats[i].chunk_program.c_str(), rec.step_us, rec.estimate_step_us,
                      rec.step_us / rec.estimate_step_us);
        progress(line);
      }
    }
    speedups_vs_exact(runs, times, &recs, progress);
    out->records.insert(out->records.end(), recs.begin(), recs.end());
  }
  return Status::Ok();
}

namespace {

// The planner's estimate of a step by part beside a measured step of `measured_us`; empty without one.
std::string estimate_line(const BenchReport& rep, const BenchRecord& r, double measured_us) {
  if (r.model_breakdown_us.empty()) return "";
  double model = 0;
  for (const auto& [part, us] : r.model_breakdown_us) model += us;
  std::string s = "  the planner's estimate (host description), per step (us):";
  char line[96];
  for (const auto& [part, us] : r.model_breakdown_us) {
    std::snprintf(line, sizeof line, " %s %.2f", part.c_str(), us);
    s += line;
  }
  std::snprintf(line, sizeof line, "; total %.2f, measured / estimate %.2f\n", model, measured_us / model);
  s += line;
  // Uncalibrated, the estimate's rates are the shipped default's (e.g. a bf16 unit of one VDPBF16PS a cycle
  // where this CPU may have AMX tiles): say how to get this machine's.
  if (!rep.host_calibrated) {
    s += "  (the shipped host description, not this machine's: `hanpu calibrate` measures its units and writes " +
         plan::calibrated_host_path() + ")\n";
  } else if (rep.peak_vs_calibration > 0 && !plan::fma_peak_steady(rep.peak_vs_calibration)) {
    std::snprintf(line, sizeof line, "  (this run's FMA peak is %.2fx the calibration's: the estimate is at its speed)\n",
                  rep.peak_vs_calibration);
    s += line;
  }
  return s;
}

}  // namespace

std::string format_bench_table(const BenchReport& rep) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "FMA peak (fp32, measured this run): %.1f GFLOP/s; bf16 GEMM unit: %s, %.1f GFLOP/s\n",
                rep.fma_peak_gflops, rep.matrix_unit.c_str(), rep.matrix_peak_gflops);
  s += line;
  s += amx_line(rep) + "\n";
  std::snprintf(line, sizeof line, "%-4s %-13s %-5s %-5s %7s %5s %-13s %9s %9s %9s %8s %6s %10s %11s %9s %9s\n",
                "kind", "preset", "dtype", "prec", "T", "batch", "strategy", "median_ms", "min_ms", "max_ms", "GFLOP/s",
                "util", "ws_MiB", "traffic_MiB", "rms_o", "rms_S");
  s += line;
  for (const BenchRecord& r : rep.records) {
    std::snprintf(line, sizeof line,
                  "%-4s %-13s %-5s %-5s %7lld %5lld %-13s %9.3f %9.3f %9.3f %8.1f %5.0f%% %10.2f %11.1f %9.2e %9.2e\n",
                  r.kind.c_str(), r.preset.c_str(), r.dtype.c_str(), r.precision.c_str(), static_cast<long long>(r.tokens),
                  static_cast<long long>(r.batch), r.strategy.c_str(), r.median_ms, r.min_ms, r.max_ms, r.gflops,
                  100 * (r.batch ? r.utilization : r.matrix_utilization), r.peak_workspace_bytes / 1048576.0,
                  r.traffic_bytes / 1048576.0, r.rel_rms_o, r.rel_rms_state);
    s += line;
  }
  for (const BenchRecord& r : rep.records) {
    if (!std::isfinite(r.speedup_vs_exact)) continue;
    std::snprintf(line, sizeof line,
                  "speedup %s %s T=%lld: bf16 %.2fx exact (median of the per-round ratios, %.2f-%.2f)\n",
                  r.kind.c_str(), r.strategy.c_str(), static_cast<long long>(r.tokens), r.speedup_vs_exact,
                  r.speedup_vs_exact_min, r.speedup_vs_exact_max);
    s += line;
  }
  for (const BenchRecord& r : rep.records) {
    if (r.breakdown_ms.empty() || r.chunk_steps == 0) continue;
    double total = 0;
    for (const auto& [part, ms] : r.breakdown_ms) total += ms;
    std::snprintf(line, sizeof line, "breakdown %s %s T=%lld %s, per (chunk, head) step of %lld (us, share):",
                  r.kind.c_str(), r.strategy.c_str(), static_cast<long long>(r.tokens), r.precision.c_str(),
                  static_cast<long long>(r.chunk_steps));
    s += line;
    for (const auto& [part, ms] : r.breakdown_ms) {
      std::snprintf(line, sizeof line, " %s %.2f (%.0f%%)", part.c_str(), 1e3 * ms / r.chunk_steps,
                    total > 0 ? 100 * ms / total : 0.0);
      s += line;
    }
    s += "\n";
    s += estimate_line(rep, r, 1e3 * total / r.chunk_steps);
  }
  for (const BenchRecord& r : rep.records) {
    if (r.parts_us.empty()) continue;
    std::snprintf(line, sizeof line,
                  "parts %s %s %s %s, one (chunk, head) step of %lld rows in cache on one thread, %lld steps "
                  "(us, median / best):",
                  r.kind.c_str(), r.preset.c_str(), r.dtype.c_str(), r.precision.c_str(),
                  static_cast<long long>(r.tokens), static_cast<long long>(r.parts_steps));
    s += line;
    for (std::size_t i = 0; i < r.parts_us.size(); ++i) {
      std::snprintf(line, sizeof line, " %s %.2f / %.2f", r.parts_us[i].first.c_str(), r.parts_us[i].second,
                    r.parts_min_us[i].second);
      s += line;
    }
    std::snprintf(line, sizeof line, "; step %.2f / %.2f\n", 1e3 * r.median_ms, 1e3 * r.min_ms);
    s += line;
    s += estimate_line(rep, r, 1e3 * r.median_ms);
  }
  return s;
}

std::string format_bench_json(const BenchReport& rep, const BenchConfig& cfg) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["fma_peak_gflops"] = rep.fma_peak_gflops;
  j["matrix_peak_gflops"] = rep.matrix_peak_gflops;
  j["matrix_unit"] = rep.matrix_unit;
  j["auto_bf16_mode"] = rep.auto_bf16_mode;
  j["amx"] = {{"usable", rep.amx_usable}, {"reason", rep.amx_reason}};
  j["host_description"] = rep.host_calibrated ? "calibrated" : "shipped default";
  j["host_description_note"] = rep.host_note;
  j["calibration_fma_peak_gflops"] = rep.calibration_fma_peak_gflops > 0 ? num(rep.calibration_fma_peak_gflops) : nullptr;
  j["fma_peak_vs_calibration"] = rep.peak_vs_calibration > 0 ? num(rep.peak_vs_calibration) : nullptr;
  j["precision"] = precision_name(cfg.precisions.empty() ? Precision::kAuto : cfg.precisions.front());
  j["precisions"] = nlohmann::json::array();
  for (Precision p : cfg.precisions) j["precisions"].push_back(precision_name(p));
  j["reps"] = cfg.reps;
  j["records"] = nlohmann::json::array();
  for (const BenchRecord& r : rep.records) {
    j["records"].push_back({{"kind", r.kind}, {"preset", r.preset}, {"strategy", r.strategy}, {"tokens", r.tokens}, {"batch", r.batch},
                            {"threads", r.threads}, {"dtype", r.dtype}, {"simd_target", r.simd_target},
                            {"median_ms", r.median_ms}, {"min_ms", r.min_ms}, {"max_ms", r.max_ms},
                            {"flops", r.flops}, {"gflops", r.gflops}, {"utilization", r.utilization},
                            {"peak_workspace_bytes", r.peak_workspace_bytes}, {"traffic_bytes", r.traffic_bytes},
                            {"nmse_o", num(r.nmse_o)}, {"nmse_state", num(r.nmse_state)}, {"precision", r.precision},
                            {"rel_rms_o", num(r.rel_rms_o)}, {"rel_rms_state", num(r.rel_rms_state)},
                            {"bf16_floor_o", num(r.bf16_floor_o)}, {"matrix_utilization", num(r.matrix_utilization)},
                            {"fla_emulation_rel_rms_o", num(r.fla_rel_rms_o)},
                            {"fla_emulation_rel_rms_state", num(r.fla_rel_rms_state)}});
    if (std::isfinite(r.speedup_vs_exact)) {
      j["records"].back()["speedup_vs_exact"] = r.speedup_vs_exact;
      j["records"].back()["speedup_vs_exact_range"] = {r.speedup_vs_exact_min, r.speedup_vs_exact_max};
    }
    if (std::isfinite(r.estimate_step_us)) {
      j["records"].back()["step_us"] = r.step_us;
      j["records"].back()["estimate_step_us"] = r.estimate_step_us;
    }
    if (!r.breakdown_ms.empty()) {
      nlohmann::json b;
      for (const auto& [part, ms] : r.breakdown_ms) b[part] = ms;
      j["records"].back()["breakdown_ms"] = b;
      j["records"].back()["chunk_steps"] = r.chunk_steps;
    }
    if (!r.parts_us.empty()) {
      nlohmann::json med, best;
      for (const auto& [part, us] : r.parts_us) med[part] = us;
      for (const auto& [part, us] : r.parts_min_us) best[part] = us;
      j["records"].back()["parts_us"] = med;
      j["records"].back()["parts_min_us"] = best;
      j["records"].back()["parts_steps"] = r.parts_steps;
    }
    if (!r.model_breakdown_us.empty()) {
      nlohmann::json b;
      for (const auto& [part, us] : r.model_breakdown_us) b[part] = us;
      j["records"].back()["breakdown_estimate_step_us"] = b;
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace hanpu
