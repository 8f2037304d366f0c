// Helpers shared by the NPU-model tests: shipped devices and capacity variants.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "plan/device.h"

namespace hanpu::sim::testing {

inline plan::Device device(const std::string& name) {
  plan::Device d;
  EXPECT_TRUE(plan::load_device(name, &d).ok()) << name;
  return d;
}

// `d` with on-chip memory `memory` resized to `bytes`.
inline plan::Device with_capacity(plan::Device d, const std::string& memory, int64_t bytes) {
  for (plan::Memory& m : d.memories) {
    if (m.name == memory) m.bytes = bytes;
  }
  return d;
}

}  // namespace hanpu::sim::testing
