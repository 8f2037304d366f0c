#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "verify/verify.h"

namespace hanpu {
namespace {

TEST(Verify, NmseDefinition) {
  EXPECT_EQ(nmse({1, 2}, {1, 2}), 0.0);
  EXPECT_NEAR(nmse({1.1, 2}, {1, 2}), 0.01 / 5, 1e-15);
  EXPECT_TRUE(std::isinf(nmse({NAN, 2}, {1, 2})));
  EXPECT_DOUBLE_EQ(nmse({0.5, 0}, {0, 0}), 0.25);  // all-zero reference: absolute sum of squares
}

TEST(Verify, InstancesAreDeterministicPerSeedAndIndex) {
  const Instance a = make_instance(3, 17), b = make_instance(3, 17), c = make_instance(4, 17);
  EXPECT_EQ(serialize_safetensors(a.tensors), serialize_safetensors(b.tensors));
  EXPECT_NE(serialize_safetensors(a.tensors), serialize_safetensors(c.tensors));
  EXPECT_EQ(a.describe(), b.describe());
}

TEST(Verify, DefaultRunCoversEveryGroupAndTheRequiredShapes) {
  std::set<std::string> groups;
  bool long_seq = false, non_pow2 = false, gva = false, varlen = false, init = false, minus1000 = false;
  std::set<int> chunk_sizes;
  for (int i = 0; i < 360; ++i) {
    const Instance inst = make_instance(1, i);
    groups.insert(std::string(kind_name(inst.kind)) + dtype_name(inst.dtype) + inst.scenario);
    const Tensor& q = *inst.tensors.find("q");
    const Tensor& v = *inst.tensors.find("v");
    long_seq |= q.shape[1] >= 4096;
    non_pow2 |= (q.shape[3] & (q.shape[3] - 1)) != 0 || (v.shape[3] & (v.shape[3] - 1)) != 0;
    gva |= v.shape[2] > q.shape[2];
    varlen |= inst.tensors.find("cu_seqlens") != nullptr;
    init |= inst.tensors.find("initial_state") != nullptr;
    minus1000 |= inst.extreme_gates;
    chunk_sizes.insert(inst.opt.chunk_size);
  }
  EXPECT_EQ(groups.size(), 2u * 3u * verify_scenarios().size());
  EXPECT_TRUE(long_seq && non_pow2 && gva && varlen && init && minus1000);
  EXPECT_EQ(chunk_sizes, (std::set<int>{16, 32, 64}));
}

TEST(Verify, ARejectedInstanceCountsAsAFailure) {
  Instance inst = make_instance(1, 0);
  inst.opt.chunk_size = 7;
  const InstanceResult r = run_instance(inst);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.error.find("chunk_size"), std::string::npos);
}

}  // namespace
}  // namespace hanpu
