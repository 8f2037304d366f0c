// libFuzzer target: hanpu::fuzz::device_json (tests/fuzz/targets.h). Run by scripts/fuzz.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hanpu::fuzz::device_json(data, size);
  return 0;
}
