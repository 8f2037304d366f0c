#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

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

// verify.h's bf16 bars: pooled over a scenario's bf16 instances, n-weighted NMSE against n-weighted bars, the
// worse of the chunk path and the engine per instance; exact-mode and rejected instances left out.
TEST(Verify, Bf16BarsPoolOverAScenariosValues) {
  const auto result = [](const char* precision, int64_t n, double err, double bar) {
    InstanceResult r;
    r.precision = precision;
    r.n_o = r.n_s = n;
    r.chunk_o = r.chunk_s = err;
    r.engine_o = r.engine_s = err / 2;
    r.bar_o = r.bar_s = bar;
    return r;
  };
  // a single value at 20x its bar beside 1000 values at half of theirs: (20 + 500) / 1001
  const InstanceResult tiny = result("bf16", 1, 20e-6, 1e-6), big = result("bf16", 1000, 0.5e-6, 1e-6);
  PooledRatio pr = pooled_ratio({&tiny, &big});
  EXPECT_NEAR(pr.o, 520.0 / 1001.0, 1e-12);
  EXPECT_NEAR(pr.state, 520.0 / 1001.0, 1e-12);
  EXPECT_TRUE(pr.passed());
  InstanceResult worse_engine = result("bf16", 1000, 0.5e-6, 1e-6);
  worse_engine.engine_s = 1.2e-6;  // the engine's state over its bar: the group fails on the state alone
  pr = pooled_ratio({&tiny, &worse_engine});
  EXPECT_NEAR(pr.state, (20.0 + 1200.0) / 1001.0, 1e-12);
  EXPECT_FALSE(pr.passed());
  InstanceResult exact = result("exact", 1000, 5e-6, 1e-6), rejected = result("bf16", 1000, INFINITY, 1e-6);
  rejected.error = "rejected";
  pr = pooled_ratio({&big, &exact, &rejected});
  EXPECT_NEAR(pr.o, 0.5, 1e-12);
  EXPECT_EQ(pooled_ratio({&exact}).o, 0.0);
}

// Each bf16 instance alone is held to kBf16GrossFactor times its bars: the five instances of seeds 1-48 that
// were over their own bars (GDN states of 1, 4, 60, 128 and 768 values; the chunk path, the native strategy
// or the hanpu strategy) pass within it.
TEST(Verify, Bf16InstancesAreHeldToTheGrossErrorGuard) {
  for (const auto& [seed, index] : {std::pair<uint64_t, int>{11, 625}, {13, 319}, {7, 442}, {23, 582}, {39, 553}}) {
    Instance inst = make_instance(seed, index);
    inst.opt.precision = Precision::kBf16;
    const InstanceResult r = run_instance(inst, true);
    EXPECT_EQ(r.precision, "bf16");
    EXPECT_TRUE(r.passed) << seed << " " << index << " " << inst.describe() << ": chunk S " << r.chunk_s
                          << " engine S " << r.engine_s << " (" << r.engine_worst << ") bar " << r.bar_s << " "
                          << r.error;
  }
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
