// Helpers of the host-executor tests of the fusion runtime: the host device and host tasks built with data.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fuse/task.h"

namespace hanpu::fuse {

// The shipped host description (the planner's host, plan::load_host_device, would read a calibration this
// machine may hold).
inline plan::Device host_device() {
  plan::Device host;
  EXPECT_TRUE(plan::load_device(plan::devices_dir() + "/host.json", &host).ok());
  return host;
}

// `spec` built for the host with its data, in a 1 MiB region.
inline Task host_task(const std::string& spec) {
  Task t;
  const Status st = build_task(spec, host_device(), 1 << 20, &t, true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return t;
}

}  // namespace hanpu::fuse
