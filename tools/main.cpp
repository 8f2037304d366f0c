// hanpu command-line tool: `hanpu run` (operators on safetensors files), `hanpu verify` (accuracy sweep),
// `hanpu bench` (engine timings), `hanpu plan` (the offline planner), `hanpu calibrate` (host costs),
// `hanpu sim` (the NPU model), `hanpu fuse` (horizontal fusion of independent tasks).
#include <cstdio>
#include <map>

#include "commands.h"
#include "hanpu/version.h"

int main(int argc, char** argv) {
  CLI::App app{"hanpu " HANPU_VERSION ": delta-rule linear attention (GDN, KDA) on matrix + vector hardware"};
  app.set_version_flag("--version", HANPU_VERSION);
  app.require_subcommand(1);
  std::map<CLI::App*, hanpu::cli::Runner> runners;
  CLI::App* run = app.add_subcommand("run", "Run GDN or KDA on tensors from a safetensors file");
  runners[run] = hanpu::cli::add_run_command(*run);
  CLI::App* verify = app.add_subcommand("verify", "Check chunk and recurrent paths against the fp64 reference");
  runners[verify] = hanpu::cli::add_verify_command(*verify);
  CLI::App* bench = app.add_subcommand("bench", "Time the engine's strategies side by side");
  runners[bench] = hanpu::cli::add_bench_command(*bench);
  CLI::App* plan = app.add_subcommand("plan", "Plan a chunk's operator order and layouts for a device");
  runners[plan] = hanpu::cli::add_plan_command(*plan);
  CLI::App* calibrate = app.add_subcommand("calibrate", "Measure this machine's kernels for the planner's host device");
  runners[calibrate] = hanpu::cli::add_calibrate_command(*calibrate);
  CLI::App* simc = app.add_subcommand("sim", "Simulate strategies on an NPU model");
  runners[simc] = hanpu::cli::add_sim_command(*simc);
  CLI::App* fuse = app.add_subcommand("fuse", "Horizontal fusion of independent tasks: the four-group experiment "
                                              "and pairing under deadlines (NPU model or host)");
  runners[fuse] = hanpu::cli::add_fuse_command(*fuse);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // --help and --version succeed; every usage error is "bad input"
  }
  for (auto& [sub, runner] : runners) {
    if (sub->parsed()) return runner();
  }
  return 2;
}
