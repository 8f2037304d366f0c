// libFuzzer target: hanpu::fuzz::fuse_spec (tests/fuzz/targets.h). Run by scripts/fuzz.sh.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hanpu::fuzz::fuse_spec(data, size);
  return 0;
}
