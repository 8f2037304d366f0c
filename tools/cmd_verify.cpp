// hanpu verify [--instances N] [--seed S] [--precision auto|exact|bf16] [--json FILE] [--threads N] [--no-engine]
//              [--quiet]
#include <cstdio>
#include <fstream>
#include <memory>

#include "commands.h"
#include "verify/verify.h"

namespace hanpu::cli {

namespace {

struct VerifyArgs {
  VerifyConfig cfg;
  std::string json_path, precision = "auto";
  bool quiet = false;
};

int run(VerifyArgs a) {
  parse_precision(a.precision, &a.cfg.precision);  // the option's check admits known names only
  const std::string auto_note =
      a.cfg.precision == Precision::kAuto
          ? std::string(" (bf16 inputs in ") + precision_name(resolve_precision(Precision::kAuto, DType::kBF16)) +
                " mode on this CPU)"
          : "";
  std::fprintf(stderr, "hanpu verify: %d instances, seed %llu, precision %s%s\n", a.cfg.instances,
               static_cast<unsigned long long>(a.cfg.seed), a.precision.c_str(), auto_note.c_str());
  const VerifyReport rep = run_verify(a.cfg, [&](const InstanceResult& r, int done) {
    if (a.quiet && r.passed) return;
    std::fprintf(stderr, "[%4d/%d] %-4s %s %-4s %-5s %-17s %-60s %.2fs%s%s\n", done, a.cfg.instances,
                 r.passed ? "ok" : "FAIL", r.kind.c_str(), r.dtype.c_str(), r.precision.c_str(), r.scenario.c_str(), r.shape.c_str(),
                 r.seconds, r.error.empty() ? "" : "  ", r.error.c_str());
  });
  std::fputs(format_table(rep).c_str(), stdout);
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << format_json(rep, a.cfg);
    if (!f) {
      std::fprintf(stderr, "hanpu verify: cannot write '%s'\n", a.json_path.c_str());
      return 2;
    }
  }
  for (const auto& r : rep.results) {
    if (!r.passed) {
      std::fprintf(stderr,
                   "FAILED #%d %s %s %s %s (%s): chunk o %.3e S %.3e, engine o %.3e S %.3e (%s), recurrent o %.3e S "
                   "%.3e (bars %.3e, %.3e; recurrent %.3e, %.3e) %s\n",
                   r.index, r.kind.c_str(), r.dtype.c_str(), r.scenario.c_str(), r.shape.c_str(), r.precision.c_str(),
                   r.chunk_o, r.chunk_s, r.engine_o, r.engine_s, r.engine_worst.c_str(), r.rec_o, r.rec_s, r.bar_o,
                   r.bar_s, r.rec_bar_o, r.rec_bar_s, r.error.c_str());
    }
  }
  for (const std::string& g : rep.failed_groups) std::fprintf(stderr, "FAILED scenario %s\n", g.c_str());
  return rep.failures == 0 && rep.failed_groups.empty() ? 0 : 1;
}

}  // namespace

Runner add_verify_command(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  app.add_option("--instances", a->cfg.instances, "Number of random instances (default 360)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seed", a->cfg.seed, "Random seed (default 1)");
  app.add_option("--threads", a->cfg.threads, "Worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--json", a->json_path, "Also write the report as JSON to FILE");
  app.add_flag("--quiet", a->quiet, "Print progress lines for failures only");
  app.add_option("--precision", a->precision,
                 "GEMM precision of the chunk and engine paths: auto (default: bf16 for bf16 inputs where the CPU "
                 "has a bf16 unit faster than its fp32 FMA, else exact), exact or bf16")
      ->check(CLI::IsMember({"auto", "exact", "bf16"}));
  app.add_flag("!--no-engine", a->cfg.engine, "Skip the CPU engine's strategies (checked by default)");
  return [a] { return run(*a); };
}

}  // namespace hanpu::cli
