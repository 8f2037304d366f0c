// scripts/check-docs.py: the README's and docs/'s relative links, their #anchors and the source files they
// name in backticks all exist, so a moved file or a renamed heading fails here rather than in a reader's hands.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace {

const std::filesystem::path kRoot = std::filesystem::path(HANPU_FUZZ_DIR) / ".." / "..";

// A scratch file of this process's own (ctest runs the tests as parallel processes).
std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("hanpu_docs_" + std::to_string(::getpid()) + "_" + name);
}

// Runs the checker with args; returns its exit status and fills out with what it printed.
int run_checker(const std::string& args, std::string* out) {
  const auto log = scratch("check.log");
  const std::string cmd = "python3 " + (kRoot / "scripts" / "check-docs.py").string() + " --root " + kRoot.string() +
                          " " + args + " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  std::filesystem::remove(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(Docs, LinksAnchorsAndSourcePathsResolve) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed";
  std::string out;
  EXPECT_EQ(run_checker("", &out), 0) << out;
  EXPECT_NE(out.find("0 problems"), std::string::npos) << out;
}

TEST(Docs, CheckerReportsEachMissingTarget) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed";
  const auto doc = scratch("doc.md");
  {
    std::ofstream f(doc);
    f << "# Title\n\n## A heading\n\n"
      << "[gone](missing.md) [here](#a-heading) [nowhere](#no-such-heading) `src/no/such_file.cpp` "
      << "`kernels/gemm_amx.cpp` `src/plan/packing.h`\n"
      << "```\n[inside a fence](not-checked.md)\n```\n";
  }
  std::string out;
  EXPECT_EQ(run_checker(doc.string(), &out), 1) << out;
  EXPECT_NE(out.find(":5: link to a missing file: missing.md"), std::string::npos) << out;
  EXPECT_NE(out.find(":5: link to a missing heading: #no-such-heading"), std::string::npos) << out;
  EXPECT_NE(out.find(":5: names a file that is not in the tree: src/no/such_file.cpp"), std::string::npos) << out;
  EXPECT_EQ(out.find("not-checked.md"), std::string::npos) << out;
  EXPECT_NE(out.find("3 problems"), std::string::npos) << out;
  std::filesystem::remove(doc);
}

}  // namespace
