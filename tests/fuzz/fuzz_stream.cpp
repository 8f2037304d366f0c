// libFuzzer target: hanpu::fuzz::stream_text (tests/fuzz/targets.h). Run by scripts/fuzz.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hanpu::fuzz::stream_text(data, size);
  return 0;
}
