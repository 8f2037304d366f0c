// hanpu command-line tool: `hanpu run` (operators on safetensors files), `hanpu verify` (accuracy sweep),
// `hanpu bench` (engine timings), `hanpu plan` (the offline planner), `hanpu calibrate` (host costs),
// `hanpu sim` (the NPU model), `hanpu fuse` (horizontal fusion of independent tasks).
#include "app.h"

int main(int argc, char** argv) {
  hanpu::cli::CommandLine cl;
  try {
    cl.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cl.exit(e);
  }
  return cl.run();
}
