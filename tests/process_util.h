// Helpers for tests that run a program in its own process (the CLI, the repository's Python scripts).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/wait.h>

namespace hanpu::testing {

// A temporary path private to the running test (ctest runs the tests in parallel processes).
inline std::string temp(const std::string& name) {
  return ::testing::TempDir() + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name;
}

// Runs cmd through the shell, its stdout and stderr into *output when given; returns its exit status, or -1
// when it did not exit.
inline int run_shell(const std::string& cmd, std::string* output = nullptr) {
  const std::string log = temp("shell_output.txt");
  const int rc = std::system((cmd + " > " + log + " 2>&1").c_str());
  if (output) {
    std::ifstream f(log);
    output->assign(std::istreambuf_iterator<char>(f), {});
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline bool python3_available() { return std::system("python3 --version > /dev/null 2>&1") == 0; }

}  // namespace hanpu::testing
