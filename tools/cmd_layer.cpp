// hanpu layer (--model DIR --layer N | --preset NAME) [--tokens T] [--batch B] [--precision P] [--decode 1,16]
//             [--check] [--compare-gemm] [--threads N] [--reps R] [--json FILE]
#include <cstdio>
#include <memory>
#include <string>

#include "bench/layer_bench.h"
#include "commands.h"
#include "layer/random_weights.h"

namespace hanpu::cli {

namespace {

struct LayerArgs {
  LayerBenchConfig cfg;
  std::string precision = "auto", strategy = "hanpu", weights = "bf16", json_path;
};

int run(LayerArgs& a) {
  parse_precision(a.precision, &a.cfg.precision);  // the options' checks admit known names only
  parse_strategy(a.strategy, &a.cfg.strategy);
  a.cfg.weight_dtype = a.weights == "f32" ? DType::kF32 : DType::kBF16;
  LayerBenchReport rep;
  const Status st =
      run_layer_bench(a.cfg, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }, &rep);
  if (!st.ok()) {
    std::fprintf(stderr, "hanpu layer: %s\n", st.ToString().c_str());
    return 2;
  }
  std::fputs(format_layer_table(rep, a.cfg).c_str(), stdout);
  if (!a.json_path.empty() && !write_file(a.json_path, format_layer_json(rep, a.cfg))) {
    std::fprintf(stderr, "hanpu layer: cannot write '%s'\n", a.json_path.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

Runner add_layer_command(CLI::App& app) {
  auto a = std::make_shared<LayerArgs>();
  auto* model = app.add_option("--model", a->cfg.model_dir,
                               "Checkpoint directory (config.json + model.safetensors or a sharded index)");
  app.add_option("--layer", a->cfg.layer_index, "Layer index in the checkpoint (a linear-attention layer)")
      ->check(CLI::Range(0, 1 << 20))
      ->needs(model);
  app.add_option("--preset", a->cfg.preset, "Without --model: random weights of this shape: qwen3.5-0.8b (default), "
                                            "qwen3.5-2b, qwen3-next, kimi-linear")
      ->check(CLI::IsMember(layer::layer_preset_names()))
      ->excludes(model);
  app.add_option("--weights", a->weights, "Random weights' dtype for --preset: bf16 (default) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->excludes(model);
  app.add_option("--tokens", a->cfg.tokens, "Prefill tokens per sequence (default 4096)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--batch", a->cfg.batch, "Prefill sequences (default 1)")->check(CLI::Range(1, 4096));
  app.add_option("--precision", a->precision,
                 "auto (bf16 for a bf16 checkpoint, else exact), exact (fp32 throughout) or bf16 (rounded as "
                 "transformers' bf16 model rounds)")
      ->check(CLI::IsMember({"auto", "exact", "bf16"}));
  app.add_option("--decode", a->cfg.decode_batches, "Also time one decode step for these batch sizes (e.g. 1,16), each with its parts (from the median step)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--strategy", a->strategy, "The core's dataflow (default hanpu)")
      ->check(CLI::IsMember({"native", "fla", "fla-megakernel", "flashqla", "hanpu"}));
  app.add_option("--threads", a->cfg.threads, "Threads (default: all CPUs)")->check(CLI::Range(0, 1024));
  app.add_option("--reps", a->cfg.reps, "Timed prefill repetitions after one warm-up (default 5)")->check(CLI::Range(1, 1000));
  app.add_flag("--check", a->cfg.check, "Compare the first 64 tokens with the fp64 layer reference");
  app.add_flag("--compare-gemm", a->cfg.compare_gemm,
               "Time the stacked input projection on oneDNN and on the engine's own tile GEMM");
  app.add_option("--seed", a->cfg.seed, "Seed of the random weights and hidden states");
  app.add_option("--json", a->json_path, "Also write the results as JSON");
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
