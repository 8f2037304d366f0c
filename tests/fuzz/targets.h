// The readers hanpu exposes to files from elsewhere, as fuzz entry points: each takes arbitrary bytes and
// must return a Status (any Status) without crashing, leaking, hanging or tripping a sanitizer. Shared by
// the libFuzzer targets (tests/fuzz/fuzz_*.cpp, scripts/fuzz.sh) and the regression test that replays
// every input the fuzzer once found (tests/test_fuzz_regressions.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuse/stream.h"
#include "fuse/task.h"
#include "hanpu/safetensors.h"
#include "plan/device.h"
#include "plan/plan.h"

namespace hanpu::fuzz {

inline void safetensors(const uint8_t* data, std::size_t size) {
  TensorFile f;
  (void)parse_safetensors(data, size, &f);
}

inline void plan_json(const uint8_t* data, std::size_t size) {
  plan::Plan p;
  if (plan_from_json(std::string(reinterpret_cast<const char*>(data), size), &p).ok()) (void)plan::plan_report(p);
}

inline void device_json(const uint8_t* data, std::size_t size) {
  plan::Device d;
  (void)plan::parse_device(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json", &d);
}

// A fusion task spec ("gemm:64x64x64:f16", ...) built for a shipped NPU description and for the host.
inline void fuse_spec(const uint8_t* data, std::size_t size) {
  static const plan::Device npu = [] {
    plan::Device d;
    (void)plan::load_device("hexagon-v75", &d);
    return d;
  }();
  const std::string spec(reinterpret_cast<const char*>(data), size);
  fuse::Task t;
  (void)fuse::build_task(spec, npu, fuse::on_chip_capacity(npu) / 2, &t);
}

inline void stream_text(const uint8_t* data, std::size_t size) {
  std::vector<fuse::StreamTask> s;
  (void)fuse::parse_stream(std::string(reinterpret_cast<const char*>(data), size), &s);
}

}  // namespace hanpu::fuzz
