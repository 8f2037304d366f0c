// Pairing under deadlines on the NPU model: the policies' decisions on small streams whose times are the
// model's own alone and pair times (group 1 and group 4 runs); the same stream on one host core in real
// time; stream parsing.
#include <gtest/gtest.h>

#include "fuse/stream.h"

namespace hanpu::fuse {
namespace {

plan::Device hexagon() {
  plan::Device d;
  EXPECT_TRUE(plan::load_device("hexagon-v75", &d).ok());
  return d;
}

const char* kGemm = "gemm:512x512x512:f16";
const char* kSoftmax = "softmax:256x512:f16";

struct Times {
  double gemm, softmax;            // alone (an entry each)
  std::vector<double> pair;        // completion of gemm and softmax sharing one entry
};

Times model_times(const plan::Device& d) {
  Times t;
  Task g, s;
  EXPECT_TRUE(build_task(kGemm, d, on_chip_capacity(d) / 2, &g).ok());
  EXPECT_TRUE(build_task(kSoftmax, d, on_chip_capacity(d) / 2, &s).ok());
  GroupResult r;
  EXPECT_TRUE(run_group({g}, d, 1, &r).ok());
  t.gemm = r.makespan_us;
  EXPECT_TRUE(run_group({s}, d, 1, &r).ok());
  t.softmax = r.makespan_us;
  EXPECT_TRUE(run_group({g, s}, d, 4, &r).ok());
  t.pair = r.completion_us;
  return t;
}

StreamResult run(const std::string& text, const std::string& policy, double cap_us = 1e9) {
  std::vector<StreamTask> stream;
  EXPECT_TRUE(parse_stream(text, &stream).ok());
  StreamResult r;
  const Status st = run_stream(stream, hexagon(), policy, cap_us, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

TEST(FuseStream, PoliciesOnTwoTasksArrivingTogether) {
  const Times t = model_times(hexagon());
  const std::string s = std::string("0 ") + kGemm + " 100000\n0 " + kSoftmax + " -\n";
  const StreamResult fifo = run(s, "fifo");
  EXPECT_EQ(fifo.pairs, 0);
  EXPECT_DOUBLE_EQ(fifo.completion_us[0], t.gemm);
  EXPECT_DOUBLE_EQ(fifo.completion_us[1], t.gemm + t.softmax);
  const StreamResult pairing = run(s, "pairing");
  EXPECT_EQ(pairing.entries, 1);
  EXPECT_EQ(pairing.completion_us, t.pair);
  EXPECT_EQ(run(s, "admission").pairs, 1);
  EXPECT_EQ(run(s, "admission", t.softmax / 2).pairs, 0);  // the partner's time is over the cap
  // A deadline the pair would break but running alone keeps: no pairing.
  if (t.pair[0] > t.gemm) {
    const std::string tight = std::string("0 ") + kGemm + " " + std::to_string(t.gemm + 1e-3) + "\n0 " + kSoftmax + " -\n";
    EXPECT_EQ(run(tight, "pairing").pairs, 0);
  }
  EXPECT_DOUBLE_EQ(fifo.deadline_miss_rate, 0);
  EXPECT_GT(fifo.throughput_per_s, 0);
}

// The GEMM waits for a partner arriving at 50 us only while 50 + its pair completion fits its deadline.
TEST(FuseStream, PairingWaitsOnlyWhileTheDeadlineAllows) {
  const Times t = model_times(hexagon());
  const double arrive = 50, wait_fits = arrive + t.pair[0] + 10;
  auto stream = [&](double deadline) {
    return std::string("0 ") + kGemm + " " + std::to_string(deadline) + " 10\n" + std::to_string(arrive) + " " +
           kSoftmax + "\n";
  };
  const StreamResult waited = run(stream(wait_fits + 1), "pairing");
  EXPECT_EQ(waited.pairs, 1);
  EXPECT_NEAR(waited.completion_us[0], arrive + t.pair[0], 1e-6);
  EXPECT_EQ(waited.deadline_miss_rate, 0);
  const StreamResult alone = run(stream(wait_fits - 1), "pairing");
  EXPECT_EQ(alone.pairs, 0);
  EXPECT_NEAR(alone.completion_us[0], t.gemm, 1e-6);
}

// On one host core in real time: entries run one after another (fifo: each task its own entry, in
// arrival order, the clock never running backwards), pairing puts two best-effort tasks with different
// dominant engines into one entry, and a later arrival is waited for by the clock.
TEST(FuseStream, RunsOnOneHostCoreInRealTime) {
  plan::Device host;
  ASSERT_TRUE(plan::load_device(plan::devices_dir() + "/host.json", &host).ok());  // shipped, not a calibration
  std::vector<StreamTask> s;
  ASSERT_TRUE(parse_stream("0 gemm:96x96x96\n0 softmax:96x256:f32\n3000 rmsnorm:64x256\n", &s).ok());
  StreamResult fifo, pairing;
  ASSERT_TRUE(run_stream(s, host, "fifo", 1e9, &fifo, Executor::kHostCore).ok());
  EXPECT_EQ(fifo.entries, 3);
  EXPECT_EQ(fifo.pairs, 0);
  EXPECT_GT(fifo.completion_us[0], 0);
  EXPECT_GT(fifo.completion_us[1], fifo.completion_us[0]);
  EXPECT_GT(fifo.completion_us[2], 3000);  // it arrives at 3000 us
  ASSERT_TRUE(run_stream(s, host, "pairing", 1e9, &pairing, Executor::kHostCore).ok());
  EXPECT_EQ(pairing.pairs, 1);
  EXPECT_EQ(pairing.entries, 2);
  StreamResult r;
  EXPECT_NE(run_stream(s, host, "fifo", 1, &r, Executor::kHost).message().find("one host core"), std::string::npos);
  EXPECT_NE(run_stream(s, host, "fifo", 1, &r).message().find("no \"sim\" section"), std::string::npos);
}

TEST(FuseStream, ParsingNamesTheLine) {
  std::vector<StreamTask> s;
  EXPECT_NE(parse_stream("0 gemm:8x8x8\n5 softmax:8x8 x\n", &s).message().find("line 2"), std::string::npos);
  EXPECT_NE(parse_stream("5 a:1x1\n1 b:1x1\n", &s).message().find("must not decrease"), std::string::npos);
  EXPECT_NE(parse_stream("# nothing\n", &s).message().find("no tasks"), std::string::npos);
  ASSERT_TRUE(parse_stream("0 gemm:8x8x8 100 20  # a comment\n3 softmax:8x8 -\n", &s).ok());
  EXPECT_EQ(s[0].deadline_us, 100);
  EXPECT_EQ(s[0].chain_us, 20);
  EXPECT_EQ(s[1].deadline_us, 0);
  StreamResult r;
  EXPECT_NE(run_stream(s, hexagon(), "lifo", 1, &r).message().find("unknown policy"), std::string::npos);
}

}  // namespace
}  // namespace hanpu::fuse
