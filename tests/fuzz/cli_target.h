// The command line's argument parsing as a fuzz entry point (tools/app.h): the bytes are an argument
// vector, one argument per line, parsed by every subcommand's options and checks and never run. Kept apart
// from targets.h because it needs the CLI's sources (hanpu_cli), which the file readers' targets do not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app.h"

namespace hanpu::fuzz {

inline void command_line(const uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"hanpu"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  cli::CommandLine cl;
  try {
    cl.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {  // usage errors, --help and --version: CLI11's answers, not crashes
  }
}

}  // namespace hanpu::fuzz
