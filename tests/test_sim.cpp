// The NPU model's discrete-event core on hand-computable programs (the arithmetic is in each test).
#include <gtest/gtest.h>

#include "sim/event_sim.h"

namespace hanpu::sim {
namespace {

Task compute(int core, const char* engine, double cycles, std::vector<int> deps = {}) {
  Task t;
  t.core = core;
  t.engine = engine;
  t.cycles = cycles;
  t.deps = std::move(deps);
  t.label = engine;
  return t;
}

Task transfer(int core, const char* engine, double bytes, double rate, bool global, double setup = 0,
              std::vector<int> deps = {}) {
  Task t = compute(core, engine, setup, std::move(deps));
  t.bytes = bytes;
  t.path_bytes_per_cycle = rate;
  t.global = global;
  return t;
}

Schedule run(const Program& p, Machine m) {
  Schedule s;
  const Status st = simulate(p, m, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

// 2 GHz: Cube 1000 cycles = 500 ns; the dependent Vector task (400 cycles = 200 ns) runs 500..700 ns.
// A second Cube task queues behind the first (in-order): 500..1000 ns. An independent Vector task on
// core 1 starts at 0.
TEST(Sim, ComputeChainsAndInOrderQueues) {
  Program p;
  const int a = p.add(compute(0, "Cube", 1000));
  const int b = p.add(compute(0, "Vector", 400, {a}));
  const int c = p.add(compute(0, "Cube", 1000));
  const int d = p.add(compute(1, "Vector", 300));
  const Schedule s = run(p, {2.0, 0});
  EXPECT_DOUBLE_EQ(s.start_ns[b], 500);
  EXPECT_DOUBLE_EQ(s.end_ns[b], 700);
  EXPECT_DOUBLE_EQ(s.start_ns[c], 500);
  EXPECT_DOUBLE_EQ(s.end_ns[c], 1000);
  EXPECT_DOUBLE_EQ(s.start_ns[d], 0);
  EXPECT_DOUBLE_EQ(s.end_ns[d], 150);
  EXPECT_DOUBLE_EQ(s.makespan_ns, 1000);
  EXPECT_DOUBLE_EQ((s.busy_ns.at({0, "Cube"})), 1000);
  EXPECT_DOUBLE_EQ((s.busy_ns.at({0, "Vector"})), 200);
}

// 1 GHz, path 100 B/cycle = 100 B/ns, set-up 422 cycles: 422 ns + 1e6 B / 100 B/ns = 10,422 ns.
TEST(Sim, TransferIsSetUpPlusBytesOverRate) {
  Program p;
  const int t = p.add(transfer(0, "MTE2", 1e6, 100, true, 422));
  const Schedule s = run(p, {1.0, 0});
  EXPECT_DOUBLE_EQ(s.end_ns[t], 10422);
  EXPECT_DOUBLE_EQ(s.global_bytes, 1e6);
}

// Global bandwidth 100 B/ns shared by two transfers whose paths could each do 100 B/ns: 1e6 B and
// 5e5 B start together at 50 B/ns each; the smaller ends at 5e5 / 50 = 10,000 ns, having let the larger
// move 5e5 B; the larger then runs alone at 100 B/ns for its last 5e5 B: 5,000 ns more, ending at 15,000.
TEST(Sim, GlobalBandwidthIsSharedFairly) {
  Program p;
  const int big = p.add(transfer(0, "MTE2", 1e6, 100, true));
  const int small = p.add(transfer(1, "MTE2", 5e5, 100, true));
  const int local = p.add(transfer(2, "MTE1", 1e6, 100, false));  // on-core: not in the share
  const Schedule s = run(p, {1.0, 100});
  EXPECT_NEAR(s.end_ns[small], 10000, 1e-6);
  EXPECT_NEAR(s.end_ns[big], 15000, 1e-6);
  EXPECT_NEAR(s.end_ns[local], 10000, 1e-6);
  EXPECT_DOUBLE_EQ(s.global_bytes, 1.5e6);  // conservation: exactly the global transfers' bytes
}

// A slow path caps a transfer below its share: path 20 B/ns, share 50 B/ns -> 20 B/ns; the other gets
// the rest only up to its own fair share (equal shares, no redistribution): 50 B/ns.
TEST(Sim, PathRateCapsTheShare) {
  Program p;
  const int slow = p.add(transfer(0, "MTE2", 2e5, 20, true));
  const int fast = p.add(transfer(1, "MTE2", 5e5, 100, true));
  const Schedule s = run(p, {1.0, 100});
  EXPECT_NEAR(s.end_ns[fast], 10000, 1e-6);  // 5e5 / 50
  EXPECT_NEAR(s.end_ns[slow], 10000, 1e-6);  // 2e5 / 20
}

TEST(Sim, DeterministicAndValidated) {
  Program p;
  int last = -1;
  for (int i = 0; i < 200; ++i) {
    const char* eng = i % 3 == 0 ? "MTE2" : i % 3 == 1 ? "Cube" : "Vector";
    Task t = i % 3 == 0 ? transfer(i % 4, eng, 1000 + i, 64, true, 10) : compute(i % 4, eng, 100 + i);
    if (last >= 0 && i % 2) t.deps = {last};
    last = p.add(t);
  }
  const Schedule a = run(p, {1.5, 80}), b = run(p, {1.5, 80});
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  for (int i = 0; i < 200; ++i) {
    for (int d : p.tasks()[i].deps) EXPECT_GE(a.start_ns[i], a.end_ns[d]);  // dependencies respected
  }
  Program bad;
  bad.add(compute(0, "Cube", 10, {1}));
  Schedule s;
  EXPECT_NE(simulate(bad, {1, 0}, &s).message().find("not an earlier one"), std::string::npos);
  Program norate;
  norate.add(transfer(0, "MTE2", 10, 0, true));
  EXPECT_NE(simulate(norate, {1, 0}, &s).message().find("needs a path rate"), std::string::npos);
}

}  // namespace
}  // namespace hanpu::sim
