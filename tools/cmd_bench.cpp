// hanpu bench [--kind gdn|kda] [--preset NAME] [--tokens LIST] [--heads H] [--v-heads HV] [--threads N]
//             [--dtype f32|bf16|f16] [--precision LIST of auto|exact|bf16] [--breakdown] [--strategies LIST] [--ablation] [--decode]
//             [--parts] [--reps N] [--json FILE] [--plot FILE]
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/plot.h"
#include "commands.h"
#include "plan/plan.h"

namespace hanpu::cli {

namespace {

struct BenchArgs {
  BenchConfig cfg;
  std::string kind, dtype = "f32", json_path, plot_path, plan_path;
  std::vector<std::string> precisions = {"auto"};
  int64_t heads = 0, v_heads = 0;
};

int run(BenchArgs& a) {
  BenchConfig& c = a.cfg;
  for (const Preset& p : bench_presets()) {
    if (c.preset == p.name) {
      c.kind = p.kind;
      c.H = p.H;
      c.HV = p.HV;
      c.K = p.K;
      c.V = p.V;
    }
  }
  if (!a.kind.empty()) c.kind = a.kind == "kda" ? Kind::kKda : Kind::kGdn;
  if (a.heads > 0) c.H = a.heads;
  if (a.v_heads > 0) c.HV = a.v_heads;
  else if (a.heads > 0) c.HV = a.heads;
  if (c.HV % c.H != 0) {
    std::fprintf(stderr, "hanpu bench: --v-heads (%lld) must be a multiple of --heads (%lld)\n",
                 static_cast<long long>(c.HV), static_cast<long long>(c.H));
    return 2;
  }
  c.dtype = a.dtype == "bf16" ? DType::kBF16 : a.dtype == "f16" ? DType::kF16 : DType::kF32;
  c.precisions.clear();
  for (const std::string& name : a.precisions) {  // the option's check admits known names only
    parse_precision(name, &c.precisions.emplace_back());
  }
  if (!a.plan_path.empty()) {
    auto pl = std::make_shared<plan::Plan>();
    const Status ps = plan::load_plan_file(a.plan_path, pl.get());
    if (!ps.ok()) {
      std::fprintf(stderr, "hanpu bench: %s\n", ps.ToString().c_str());
      return 2;
    }
    // The plan fixes what runs: its strategy, kind, dims, sequence, value heads and workers.
    const plan::Mapping& m = pl->mapping;
    if (m.shape.sequences() != 1) {
      std::fprintf(stderr, "hanpu bench: --plan needs a plan for one sequence (it has %lld)\n",
                   static_cast<long long>(m.shape.sequences()));
      return 2;
    }
    c.kind = pl->kind;
    c.K = pl->opt.K;
    c.V = pl->opt.V;
    c.HV = m.shape.HV;
    if (c.HV % c.H != 0) c.H = c.HV;
    c.tokens = {m.shape.seq_tokens[0]};
    c.threads = m.shape.workers;
    c.strategies = {pl->strategy};
    c.plan = std::move(pl);
  }
  BenchReport rep;
  const Status st = run_bench(c, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }, &rep);
  if (!st.ok()) {
    std::fprintf(stderr, "hanpu bench: %s\n", st.ToString().c_str());
    return 2;
  }
  std::fputs(format_bench_table(rep).c_str(), stdout);
  const std::pair<const std::string*, std::string> files[] = {
      {&a.json_path, a.json_path.empty() ? "" : format_bench_json(rep, c)},
      {&a.plot_path, a.plot_path.empty() ? "" : svg_time_vs_tokens(rep)}};
  for (const auto& [path, text] : files) {
    if (path->empty()) continue;
    std::ofstream f(*path);
    f << text;
    if (!f) {
      std::fprintf(stderr, "hanpu bench: cannot write '%s'\n", path->c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  std::vector<std::string> preset_names;
  for (const Preset& p : bench_presets()) preset_names.push_back(p.name);
  app.add_option("--preset", a->cfg.preset, "Model shape: qwen3.5-0.8b (default), qwen3.5-2b, qwen3-next, kimi-linear")
      ->check(CLI::IsMember(preset_names));
  app.add_option("--kind", a->kind, "Override the preset's operator: gdn or kda")->check(CLI::IsMember({"gdn", "kda"}));
  app.add_option("--tokens", a->cfg.tokens, "Sequence lengths (default 512 1024 ... 65536)")->delimiter(',');
  app.add_option("--heads", a->heads, "q/k heads H (overrides the preset)")->check(CLI::Range(1, 4096));
  app.add_option("--v-heads", a->v_heads, "value heads HV (default H)")->check(CLI::Range(1, 4096));
  app.add_option("--threads", a->cfg.threads, "Threads (default: all CPUs)")->check(CLI::Range(0, 1024));
  app.add_option("--dtype", a->dtype, "Input dtype: f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--precision", a->precisions,
                 "GEMM precision: auto (bf16 for bf16 inputs where the CPU has a bf16 unit faster than its fp32 "
                 "FMA, else exact), exact (fp32 operands) or bf16 (operands rounded to bf16, fp32 accumulation); "
                 "several (exact,bf16) run each strategy in each mode, interleaved, with bf16's speedup over exact "
                 "measured round by round")
      ->delimiter(',')
      ->check(CLI::IsMember({"auto", "exact", "bf16"}));
  app.add_flag("--breakdown", a->cfg.breakdown,
               "Also time the hanpu strategy's chunk steps by kind (load, scores, inverse, gemm, vector, store, and "
               "prefetch: asking for the next step's rows) in one extra run per length");
  app.add_option("--strategies", a->cfg.strategies, "Strategies to run (default: native,fla,fla-megakernel,flashqla,hanpu)")->delimiter(',');
  app.add_flag("--ablation", a->cfg.ablation,
               "Instead of --strategies: fla, then +fusion, +tail-split, +chunk-first, +gemm-first, +layout-plan "
               "(cumulative); in bf16 precision the packing ablation: pack-always, never-keep, planned, each beside "
               "the planner's estimate");
  app.add_option("--plan", a->plan_path, "Run this execution plan (hanpu plan --json): its strategy, shape and workers");
  CLI::Option* decode = app.add_flag("--decode", a->cfg.decode, "Per-step latency of one decode token for batches of 1..64 sequences");
  app.add_flag("--parts", a->cfg.parts,
               "Instead of prefill runs: one (chunk, head) step of the hanpu strategy repeated on the same data "
               "(in cache, one thread, 100 x --reps steps), each part's median and best time beside the planner's "
               "estimate")
      ->excludes(decode)
      ->excludes("--ablation")
      ->excludes("--plan")
      ->excludes("--tokens")
      ->excludes("--strategies")
      ->excludes("--threads")
      ->excludes("--breakdown");
  app.add_option("--reps", a->cfg.reps, "Timed repetitions after one warm-up each, the runs interleaved round by round (default 5); with --parts, 100 x N in-cache steps")->check(CLI::Range(1, 1000));
  app.add_option("--seed", a->cfg.seed, "Input seed");
  app.add_option("--json", a->json_path, "Also write one JSON record per (strategy, tokens)");
  app.add_option("--plot", a->plot_path, "Also write an SVG of median time vs tokens per strategy");
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
