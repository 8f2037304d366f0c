#include "app.h"

#include <cstdio>
#include <new>

#include "hanpu/version.h"

namespace hanpu::cli {

CommandLine::CommandLine()
    : app_("hanpu " HANPU_VERSION ": delta-rule linear attention (GDN, KDA) on matrix + vector hardware") {
  app_.set_version_flag("--version", HANPU_VERSION);
  app_.require_subcommand(1);
  const auto add = [this](const char* name, const char* help, Runner (*adder)(CLI::App&)) {
    CLI::App* sub = app_.add_subcommand(name, help);
    runners_[sub] = adder(*sub);
  };
  add("run", "Run GDN or KDA on tensors from a safetensors file", add_run_command);
  add("verify", "Check chunk and recurrent paths against the fp64 reference", add_verify_command);
  add("bench", "Time the engine's strategies side by side", add_bench_command);
  add("plan", "Plan a chunk's operator order and layouts for a device", add_plan_command);
  add("calibrate", "Measure this machine's kernels for the planner's host device", add_calibrate_command);
  add("sim", "Simulate strategies on an NPU model", add_sim_command);
  add("fuse",
      "Horizontal fusion of independent tasks: the four-group experiment and pairing under deadlines (NPU model "
      "or host)",
      add_fuse_command);
  add("layer", "Run one whole linear-attention layer (a checkpoint's or a preset's): time, parts, decode, check",
      add_layer_command);
}

int CommandLine::run() const {
  for (const auto& [sub, runner] : runners_) {
    if (!sub->parsed()) continue;
    // The commands size what they allocate from their options; one that asks for more than the process can
    // have ends here with a message, not in std::terminate (the sizes that are sure not to fit are refused
    // before anything is allocated: bench_common.h check_fits_in_memory).
    try {
      return runner();
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "hanpu %s: out of memory: the request needs more memory than this process can allocate\n",
                   sub->get_name().c_str());
      return 2;
    }
  }
  return 2;
}

}  // namespace hanpu::cli
