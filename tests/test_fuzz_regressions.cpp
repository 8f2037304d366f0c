// Every input in tests/fuzz/corpus (the seeds) and tests/fuzz/regressions (what the fuzzers once found),
// replayed through its reader in the normal test build (under ASan + UBSan in CI's sanitizer pass): each
// must come back with a Status, whatever it says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

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

}  // namespace
}  // namespace hanpu
