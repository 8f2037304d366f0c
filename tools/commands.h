// Subcommands of the `hanpu` command-line tool. Each registers its options on a CLI11 subcommand and
// returns a runner giving the process exit code: 0 success, 1 verification failure, 2 bad input.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <functional>
#include <string>

namespace hanpu::cli {

using Runner = std::function<int()>;

Runner add_run_command(CLI::App& app);
Runner add_verify_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_plan_command(CLI::App& app);
Runner add_calibrate_command(CLI::App& app);
Runner add_sim_command(CLI::App& app);
Runner add_fuse_command(CLI::App& app);
Runner add_layer_command(CLI::App& app);

// Writes `text` to `path`; false if the file cannot be written.
inline bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace hanpu::cli
