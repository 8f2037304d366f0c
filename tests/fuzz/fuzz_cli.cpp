// libFuzzer target: hanpu::fuzz::command_line (tests/fuzz/cli_target.h). Run by scripts/fuzz.sh.
#include "cli_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hanpu::fuzz::command_line(data, size);
  return 0;
}
