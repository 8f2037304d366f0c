// scripts/check-docs.py: the README's and docs/'s relative links, their #anchors and the source files they
// name in backticks all exist, so a moved file or a renamed heading fails here rather than in a reader's hands.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "process_util.h"

namespace hanpu {
namespace {

const std::filesystem::path kRoot = std::filesystem::path(HANPU_FUZZ_DIR) / ".." / "..";

// Runs the checker on args (documents; none: the repository's); returns its exit status, its output in *out.
int run_checker(const std::string& args, std::string* out) {
  return testing::run_shell(
      "python3 " + (kRoot / "scripts" / "check-docs.py").string() + " --root " + kRoot.string() + " " + args, out);
}

TEST(Docs, LinksAnchorsAndSourcePathsResolve) {
  if (!testing::python3_available()) GTEST_SKIP() << "python3 is not installed";
  std::string out;
  EXPECT_EQ(run_checker("", &out), 0) << out;
  EXPECT_NE(out.find("0 problems"), std::string::npos) << out;
}

TEST(Docs, CheckerReportsEachMissingTarget) {
  if (!testing::python3_available()) GTEST_SKIP() << "python3 is not installed";
  const std::string doc = testing::temp("doc.md");
  {
    std::ofstream f(doc);
    f << "# Title\n\n## A heading\n\n"
      << "[gone](missing.md) [here](#a-heading) [nowhere](#no-such-heading) `src/no/such_file.cpp` "
      << "`kernels/gemm_amx.cpp` `src/plan/packing.h`\n"
      << "```\n[inside a fence](not-checked.md)\n```\n";
  }
  std::string out;
  EXPECT_EQ(run_checker(doc, &out), 1) << out;
  EXPECT_NE(out.find(":5: link to a missing file: missing.md"), std::string::npos) << out;
  EXPECT_NE(out.find(":5: link to a missing heading: #no-such-heading"), std::string::npos) << out;
  EXPECT_NE(out.find(":5: names a file that is not in the tree: src/no/such_file.cpp"), std::string::npos) << out;
  EXPECT_EQ(out.find("not-checked.md"), std::string::npos) << out;
  EXPECT_NE(out.find("3 problems"), std::string::npos) << out;
  std::filesystem::remove(doc);
}

}  // namespace
}  // namespace hanpu
