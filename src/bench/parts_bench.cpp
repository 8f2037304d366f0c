#include "bench/parts_bench.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/bench_common.h"
#include "exec/fp_mode.h"
#include "exec/strategies.h"
#include "kernels/simd.h"
#include "ops/problem.h"

namespace hanpu {

namespace {

constexpr int64_t kWarmups = 20;  // steps before the timed ones: caches, page faults and clocks settle
// A step's own parts: one step in cache asks for no later rows (Part::kPrefetch).
constexpr int kParts = kStepParts;

// One precision mode's step: its problem, chunk program and steps (HeadSteps keeps references to the first
// two), and the times of its timed steps.
struct PartsRun {
  bool bf16 = false;
  Problem p;
  ChunkProgram prog;
  std::unique_ptr<HeadSteps> steps;
  std::vector<std::vector<double>> part_ns = std::vector<std::vector<double>>(kParts);
  std::vector<double> step_ns;
  double flops = 0;
  // One step: chunk 0 again, from the initial state; timed steps record their parts and total.
  void step(bool timed) {
    double before[kParts];
    std::copy(steps->counters().ns, steps->counters().ns + kParts, before);
    flops = steps->prepare(0);
    flops += steps->state(0);
    if (!timed) return;
    double total = 0;
    for (int part = 0; part < kParts; ++part) {
      const double ns = steps->counters().ns[part] - before[part];
      part_ns[part].push_back(ns);
      total += ns;
    }
    step_ns.push_back(total);
  }
};

}  // namespace

Status run_parts_bench(const BenchConfig& cfg, const std::function<void(const std::string&)>& progress,
                       BenchReport* out) {
  const int64_t K = cfg.K, V = cfg.V;
  Options opt;
  opt.kind = cfg.kind;
  opt.use_qk_l2norm_in_kernel = true;  // as the prefill runs call the kernels
  std::vector<Precision> modes;
  HANPU_RETURN_IF_ERROR(bench_precision_modes(cfg, &modes));
  const int64_t C = opt.chunk_size;
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
  Tensor o(cfg.dtype, {1, C, 1, V});
  Outputs outs;
  outs.o = o.view();
  const EngineConfig ec;  // the hanpu strategy as the engine plans it
  std::vector<std::unique_ptr<PartsRun>> runs;
  for (Precision mode : modes) {
    auto run = std::make_unique<PartsRun>();
    run->bf16 = mode == Precision::kBf16;
    opt.precision = mode;
    HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kChunk, &run->p));
    HANPU_RETURN_IF_ERROR(validate_outputs(run->p, outs, Mode::kChunk));
    HANPU_RETURN_IF_ERROR(engine_chunk_program(run->p, ec, &run->prog));
    runs.push_back(std::move(run));
  }

  // Chunk 0 again and again: state(0) starts from the initial state each time, so every step does the
  // same work on the same data, in the floating-point mode of the engine's threads. Several modes take
  // turns by rounds of 100 steps (each round's first steps refill the caches the other mode used).
  ScopedFlushDenormals ftz;
  for (auto& run : runs) run->steps = std::make_unique<HeadSteps>(run->p, run->prog, 0, 0, outs, /*timed=*/true);
  for (int r = -1; r < cfg.reps; ++r) {  // round -1: the warm-ups
    for (auto& run : runs) {
      for (int64_t i = 0; i < (r < 0 ? kWarmups : 100); ++i) run->step(r >= 0);
    }
  }
  const int64_t n = 100 * static_cast<int64_t>(cfg.reps);

  std::vector<BenchRecord> recs;
  for (const auto& run : runs) {
    const bool bf16 = run->bf16;
    BenchRecord rec;
    rec.kind = kind_name(cfg.kind);
    rec.preset = cfg.preset;
    rec.strategy = "parts";
    rec.dtype = dtype_name(cfg.dtype);
    rec.simd_target = simd::target_name();
    rec.tokens = C;
    rec.threads = 1;
    rec.precision = bf16 ? "bf16" : "exact";
    const std::vector<double>& step_ns = run->step_ns;
    rec.median_ms = percentile_median(step_ns) / 1e6;
    rec.min_ms = *std::min_element(step_ns.begin(), step_ns.end()) / 1e6;
    rec.max_ms = *std::max_element(step_ns.begin(), step_ns.end()) / 1e6;
    rec.flops = run->flops;
    rec.gflops = run->flops / (rec.median_ms * 1e6);
    rec.utilization = rec.gflops / out->fma_peak_gflops;
    rec.matrix_utilization = rec.gflops / (bf16 ? out->matrix_peak_gflops : out->fma_peak_gflops);
    rec.nmse_o = rec.nmse_state = rec.rel_rms_o = rec.rel_rms_state = rec.bf16_floor_o = NAN;  // accuracy: prefill runs
    rec.fla_rel_rms_o = rec.fla_rel_rms_state = NAN;
    rec.parts_steps = n;
    for (int part = 0; part < kParts; ++part) {
      const char* name = part_name(static_cast<Part>(part));
      const std::vector<double>& ns = run->part_ns[part];
      rec.parts_us.emplace_back(name, percentile_median(ns) / 1e3);
      rec.parts_min_us.emplace_back(name, *std::min_element(ns.begin(), ns.end()) / 1e3);
    }
    HANPU_RETURN_IF_ERROR(step_estimate_by_part(cfg, ec.packing, bf16, C, /*whole_run=*/false, &rec));
    char line[256];
    std::snprintf(line, sizeof line, "parts %s %s %s: one chunk step in cache %.2f us (median of %lld; best %.2f us)",
                  rec.kind.c_str(), rec.preset.c_str(), rec.precision.c_str(), rec.median_ms * 1e3,
                  static_cast<long long>(n), rec.min_ms * 1e3);
    progress(line);
    recs.push_back(rec);
  }
  // bf16's speed over exact per round: the ratio of the rounds' median steps.
  if (runs.size() == 2) {
    const PartsRun& exact = *runs[runs[0]->bf16 ? 1 : 0];
    const PartsRun& bf = *runs[runs[0]->bf16 ? 0 : 1];
    std::vector<double> ratios;
    for (int r = 0; r < cfg.reps; ++r) {
      const auto round = [r](const std::vector<double>& v) {
        return percentile_median(std::vector<double>(v.begin() + 100 * r, v.begin() + 100 * (r + 1)));
      };
      ratios.push_back(round(exact.step_ns) / round(bf.step_ns));
    }
    BenchRecord& rec = recs[runs[0]->bf16 ? 0 : 1];
    set_speedup(ratios, &rec, progress);
  }
  out->records.insert(out->records.end(), recs.begin(), recs.end());
  return Status::Ok();
}

}  // namespace hanpu
