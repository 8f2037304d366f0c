// The `hanpu` command line as one object: the CLI11 app with every subcommand registered, and each
// subcommand's runner. main() parses and runs it; the argument fuzzer (tests/fuzz/fuzz_cli.cpp) only parses.
#pragma once

#include <map>

#include "commands.h"

namespace hanpu::cli {

class CommandLine {
 public:
  CommandLine();
  CommandLine(const CommandLine&) = delete;  // runners hold references to the app's options
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses argv; throws CLI::ParseError (help, version and usage errors alike) as CLI11 does.
  void parse(int argc, const char* const* argv) { app_.parse(argc, argv); }
  // The exit code of a parse error after CLI11 printed it: 0 for --help and --version, else 2 (bad input).
  int exit(const CLI::ParseError& e) { return app_.exit(e) == 0 ? 0 : 2; }
  // Runs the parsed subcommand: 0 success, 1 verification failure, 2 bad input.
  int run() const;
  // The app itself, for what inspects the command line's surface (the fuzz dictionary's test).
  const CLI::App& app() const { return app_; }

 private:
  CLI::App app_;
  std::map<CLI::App*, Runner> runners_;
};

}  // namespace hanpu::cli
