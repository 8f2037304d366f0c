// Every input in tests/fuzz/corpus (the seeds) and tests/fuzz/regressions (what the fuzzers once found),
// replayed through its reader in the normal test build (under ASan + UBSan in CI's sanitizer pass): each
// must come back with a Status, whatever it says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "cli_target.h"
#include "targets.h"

namespace hanpu {
namespace {

TEST(FuzzRegressions, EverySeedAndFoundInputReturnsAStatus) {
  const std::map<std::string, void (*)(const uint8_t*, std::size_t)> readers = {
      {"safetensors", &fuzz::safetensors}, {"plan", &fuzz::plan_json},  {"device", &fuzz::device_json},
      {"fuse_spec", &fuzz::fuse_spec},     {"stream", &fuzz::stream_text},   {"cli", &fuzz::command_line}};
  int replayed = 0;
  for (const char* set : {"corpus", "regressions"}) {
    for (const auto& [name, read] : readers) {
      // The device reader's seeds are the shipped descriptions.
      const std::filesystem::path dir = name == "device" && std::string(set) == "corpus"
                                            ? std::filesystem::path(HANPU_FUZZ_DIR) / ".." / ".." / "devices"
                                            : std::filesystem::path(HANPU_FUZZ_DIR) / set / name;
      if (!std::filesystem::is_directory(dir)) continue;
      for (const auto& e : std::filesystem::directory_iterator(dir)) {
        if (!e.is_regular_file() || e.path().filename().string().front() == '.') continue;
        std::ifstream f(e.path(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        SCOPED_TRACE(e.path().string());
        read(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        ++replayed;
      }
    }
  }
  EXPECT_GE(replayed, 28);  // the shipped seeds at least
}

// The argument fuzzer mutates with tests/fuzz/cli.dict; a word missing there is a part of the command line
// the fuzzer reaches only by chance. Every subcommand, long option and choice of an enumerated option
// (CLI11's "{a,b,c}" validator text) must be in it; the failure prints the lines to add.
TEST(FuzzRegressions, CliDictionaryNamesEverySubcommandOptionAndChoice) {
  std::set<std::string> dict;
  std::ifstream f(std::filesystem::path(HANPU_FUZZ_DIR) / "cli.dict");
  for (std::string line; std::getline(f, line);) {
    const std::size_t a = line.find('"'), b = line.rfind('"');
    if (line.empty() || line[0] == '#' || a == std::string::npos || b <= a) continue;
    dict.insert(line.substr(a + 1, b - a - 1));
  }
  ASSERT_GT(dict.size(), 10u) << "cannot read " << HANPU_FUZZ_DIR << "/cli.dict";
  std::set<std::string> missing;
  const auto want = [&](const std::string& word) {
    if (!dict.count(word)) missing.insert(word);
  };
  const auto options_of = [&](const CLI::App& app) {
    for (const CLI::Option* o : app.get_options()) {
      for (const std::string& name : o->get_lnames()) want("--" + name);
      const std::string type = o->get_type_name();
      const std::size_t open = type.find('{'), close = type.find('}', open);
      if (open == std::string::npos || close == std::string::npos) continue;
      std::stringstream choices(type.substr(open + 1, close - open - 1));
      for (std::string c; std::getline(choices, c, ',');) want(c);
    }
  };
  cli::CommandLine cl;
  options_of(cl.app());
  const auto subcommands = cl.app().get_subcommands([](const CLI::App*) { return true; });
  EXPECT_GE(subcommands.size(), 8u);
  for (const CLI::App* sub : subcommands) {
    want(sub->get_name());
    options_of(*sub);
  }
  std::string lines;
  for (const std::string& w : missing) lines += "\"" + w + "\"\n";
  EXPECT_TRUE(missing.empty()) << missing.size() << " words missing from tests/fuzz/cli.dict; add:\n" << lines;
}

}  // namespace
}  // namespace hanpu
