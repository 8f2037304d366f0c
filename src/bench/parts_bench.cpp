#include "bench/parts_bench.h"

#include <algorithm>
#include <cstdio>

#include "bench/bench_common.h"
#include "exec/fp_mode.h"
#include "exec/strategies.h"
#include "kernels/simd.h"
#include "ops/problem.h"

namespace hanpu {

namespace {

constexpr int64_t kWarmups = 20;  // steps before the timed ones: caches, page faults and clocks settle
constexpr int kParts = static_cast<int>(Part::kCount);

}  // namespace

Status run_parts_bench(const BenchConfig& cfg, const std::function<void(const std::string&)>& progress,
                       BenchReport* out) {
  const int64_t K = cfg.K, V = cfg.V;
  Options opt;
  opt.kind = cfg.kind;
  opt.use_qk_l2norm_in_kernel = true;  // as the prefill runs call the kernels
  std::vector<Precision> modes;
  HANPU_RETURN_IF_ERROR(bench_precision_modes(cfg, &modes));
  opt.precision = modes.front();
  const int64_t C = opt.chunk_size;
  const bool bf16 = modes.front() == Precision::kBf16;
  // One head's chunk and a nonzero initial state, so that the state products see values, not zeros.
  const BenchInputs bi = bench_inputs(cfg, C, 1, 1);
  const Tensor tq = to_dtype(bi.q, cfg.dtype, {1, C, 1, K}), tk = to_dtype(bi.k, cfg.dtype, {1, C, 1, K});
  const Tensor tv = to_dtype(bi.v, cfg.dtype, {1, C, 1, V}), tb = to_dtype(bi.beta, cfg.dtype, {1, C, 1});
  const Tensor tg = cfg.kind == Kind::kKda ? to_dtype(bi.g, cfg.dtype, {1, C, 1, K}) : to_dtype(bi.g, cfg.dtype, {1, C, 1});
  std::vector<float> s0(K * V);
  fill_uniform(s0, cfg.seed + 5, 0.1f);
  Inputs in;
  in.q = tq.view();
  in.k = tk.view();
  in.v = tv.view();
  in.g = tg.view();
  in.beta = tb.view();
  in.initial_state = TensorView(s0.data(), DType::kF32, {1, 1, K, V});
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kChunk, &p));
  Tensor o(cfg.dtype, {1, C, 1, V});
  Outputs outs;
  outs.o = o.view();
  HANPU_RETURN_IF_ERROR(validate_outputs(p, outs, Mode::kChunk));
  const EngineConfig ec;  // the hanpu strategy as the engine plans it
  ChunkProgram prog;
  HANPU_RETURN_IF_ERROR(engine_chunk_program(p, ec, &prog));

  // Chunk 0 again and again: state(0) starts from the initial state each time, so every step does the
  // same work on the same data, in the floating-point mode of the engine's threads.
  ScopedFlushDenormals ftz;
  HeadSteps steps(p, prog, 0, 0, outs, /*timed=*/true);
  const int64_t n = 100 * static_cast<int64_t>(cfg.reps);
  std::vector<std::vector<double>> part_ns(kParts);
  std::vector<double> step_ns;
  double flops = 0;
  for (int64_t r = 0; r < kWarmups + n; ++r) {
    double before[kParts];
    std::copy(steps.counters().ns, steps.counters().ns + kParts, before);
    flops = steps.prepare(0);
    flops += steps.state(0);
    if (r < kWarmups) continue;
    double total = 0;
    for (int part = 0; part < kParts; ++part) {
      const double ns = steps.counters().ns[part] - before[part];
      part_ns[part].push_back(ns);
      total += ns;
    }
    step_ns.push_back(total);
  }

  BenchRecord rec;
  rec.kind = kind_name(cfg.kind);
  rec.preset = cfg.preset;
  rec.strategy = "parts";
  rec.dtype = dtype_name(cfg.dtype);
  rec.simd_target = simd::target_name();
  rec.tokens = C;
  rec.threads = 1;
  rec.precision = bf16 ? "bf16" : "exact";
  rec.median_ms = percentile_median(step_ns) / 1e6;
  rec.min_ms = *std::min_element(step_ns.begin(), step_ns.end()) / 1e6;
  rec.max_ms = *std::max_element(step_ns.begin(), step_ns.end()) / 1e6;
  rec.flops = flops;
  rec.gflops = flops / (rec.median_ms * 1e6);
  rec.utilization = rec.gflops / out->fma_peak_gflops;
  rec.matrix_utilization = rec.gflops / (bf16 ? out->matrix_peak_gflops : out->fma_peak_gflops);
  rec.nmse_o = rec.nmse_state = rec.rel_rms_o = rec.rel_rms_state = rec.bf16_floor_o = NAN;  // accuracy: prefill runs
  rec.fla_rel_rms_o = rec.fla_rel_rms_state = NAN;
  rec.parts_steps = n;
  for (int part = 0; part < kParts; ++part) {
    const char* name = part_name(static_cast<Part>(part));
    rec.parts_us.emplace_back(name, percentile_median(part_ns[part]) / 1e3);
    rec.parts_min_us.emplace_back(name, *std::min_element(part_ns[part].begin(), part_ns[part].end()) / 1e3);
  }
  HANPU_RETURN_IF_ERROR(step_estimate_by_part(cfg, ec.packing, bf16, C, &rec));
  char line[256];
  std::snprintf(line, sizeof line, "parts %s %s %s: one chunk step in cache %.2f us (median of %lld; best %.2f us)",
                rec.kind.c_str(), rec.preset.c_str(), rec.precision.c_str(), rec.median_ms * 1e3,
                static_cast<long long>(n), rec.min_ms * 1e3);
  progress(line);
  out->records.push_back(rec);
  return Status::Ok();
}

}  // namespace hanpu
