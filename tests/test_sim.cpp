// The NPU model's discrete-event core on hand-computable programs (the arithmetic is in each test).
#include <gtest/gtest.h>

#include "sim/event_sim.h"
#include "plan/strategy.h"
#include "sim/lower.h"
#include "sim_test_util.h"

#include <nlohmann/json.hpp>

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

using testing::device;

// No strategy beats its device's compute bound (matrix MACs over every core's matrix unit) or its
// bandwidth bound (global bytes over the chip's bandwidth).
TEST(SimLowering, EveryDeviceAndStrategyRespectsTheRoofline) {
  for (const std::string& name : plan::shipped_devices()) {
    const plan::Device d = device(name);
    if (!d.has_sim) continue;
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      for (const std::string& s : plan::names_of(plan::strategies())) {
        Workload w;
        w.kind = kind;
        w.heads = 12;
        w.tokens = 640;
        SimRecord r;
        const Status st = simulate_strategy(s, d, w, &r);
        ASSERT_TRUE(st.ok()) << st.ToString();
        const double compute_ns = r.matrix_macs / (d.cores * d.matrix_macs_per_cycle * d.clock_ghz);
        const double memory_ns = r.gm_bytes / d.sim.global_gbps;
        EXPECT_GE(r.latency_us * 1e3, compute_ns) << name << " " << s;
        EXPECT_GE(r.latency_us * 1e3, memory_ns) << name << " " << s;
        EXPECT_GT(r.matrix_util, 0);
        EXPECT_LE(r.matrix_util, 1);
        for (const auto& [engine, frac] : r.engine_busy) EXPECT_LE(frac, 1.0 + 1e-9) << engine;
      }
    }
  }
}

// hanpu reads each chunk's inputs once and writes its output once, and each head's final state, nothing
// else: per chunk (fp16 operands on ascend-310p) Q, K, V 64 x 128 x 2 B each, beta 64 x 1 x 2 B, the
// log-decay g in fp32 64 x 1 x 4 B, O 64 x 128 x 2 B = 4 x 16384 + 128 + 256 = 65,920 B; 16 heads x 64
// chunks = 1024 chunks; the final state 128 x 128 x 4 B = 65,536 B per head.
TEST(SimLowering, HanpuMovesExactlyTheChunkInputsAndOutputs) {
  Workload w;
  SimRecord hanpu, fla;
  ASSERT_TRUE(simulate_strategy("hanpu", device("ascend-310p"), w, &hanpu).ok());
  EXPECT_DOUBLE_EQ(hanpu.gm_bytes, 1024.0 * 65920 + 16.0 * 65536);
  EXPECT_EQ(hanpu.spill_bytes, 0);
  EXPECT_DOUBLE_EQ(hanpu.matrix_macs, 1024.0 * 5284544);  // the GEMM-first chunk (plan tests)
  ASSERT_TRUE(simulate_strategy("fla", device("ascend-310p"), w, &fla).ok());
  EXPECT_DOUBLE_EQ(fla.matrix_macs, 1024.0 * 5808832);      // FLA's order
  EXPECT_GT(fla.gm_bytes, 4 * hanpu.gm_bytes);              // the hand-offs go through global memory
}

TEST(SimLowering, AblationStepsAndTrace) {
  Workload w;
  w.heads = 10;  // a multiple of the cores: no tail to split
  w.tokens = 256;
  const plan::Device d = device("ascend-310p");
  std::map<std::string, SimRecord> rec;
  for (const std::string& s : plan::names_of(plan::ablation_ladder())) ASSERT_TRUE(simulate_strategy(s, d, w, &rec[s]).ok()) << s;
  SimRecord hanpu;
  std::string trace;
  ASSERT_TRUE(simulate_strategy("hanpu", d, w, &hanpu, &trace).ok());
  EXPECT_EQ(rec["+layout-plan"].latency_us, hanpu.latency_us);  // the last step is hanpu
  EXPECT_EQ(rec["+fusion"].gm_bytes, hanpu.gm_bytes);           // fused steps move only the chunk rows
  EXPECT_GT(rec["+fusion"].matrix_macs, rec["+gemm-first"].matrix_macs);
  const auto j = nlohmann::json::parse(trace);
  int complete = 0, flows = 0, lanes = 0;
  for (const auto& e : j["traceEvents"]) {
    complete += e["ph"] == "X";
    flows += e["ph"] == "s";
    lanes += e["ph"] == "M" && e["name"] == "thread_name";
  }
  EXPECT_EQ(complete, hanpu.tasks);
  EXPECT_GT(flows, 0);
  EXPECT_GE(lanes, 6);  // MTE2, MTE1, Cube, Vector, MTE3 and the launch lane on a core (310P: no FixPipe)
}

// The calibration metrics. Executed MACs pad every GEMM dimension to whole 16 x 16 blocks and run the solve
// as block triples: with C = 64, K = V = 128 every GEMM is block-aligned, so the two counts differ only by the
// solve: algebraic 64 * 63 * 62 / 6 = 41,664, executed 4 * 5 * 6 / 6 = 20 triples of 16^3 = 81,920.
// hanpu's device-memory footprint is its inputs, outputs and final states (it moves nothing else); FLA's
// adds every chunk's materialised W, U, V' and state; GM and transform shares are fractions, smaller for
// hanpu (head-level: no hand-offs through GM; layout plan: fewer transforms).
TEST(SimLowering, CalibrationMetrics) {
  plan::OpNode gemm;
  gemm.kind = plan::OpKind::kGemm;
  gemm.m = 64, gemm.n = 100, gemm.k = 20;
  EXPECT_DOUBLE_EQ(gemm.executed_macs(16, 16), 64.0 * 112 * 32);
  plan::OpNode solve;
  solve.kind = plan::OpKind::kSolve;
  solve.m = solve.n = solve.k = 64;
  EXPECT_DOUBLE_EQ(solve.executed_macs(16, 16), 20.0 * 4096);
  EXPECT_DOUBLE_EQ(solve.macs(), 41664.0);

  Workload w;
  SimRecord hanpu, fla;
  ASSERT_TRUE(simulate_strategy("hanpu", device("ascend-310p"), w, &hanpu).ok());
  ASSERT_TRUE(simulate_strategy("fla", device("ascend-310p"), w, &fla).ok());
  for (const SimRecord* r : {&hanpu, &fla}) {
    EXPECT_GE(r->executed_macs, r->matrix_macs);
    EXPECT_GT(r->gm_share, 0.0);
    EXPECT_LE(r->gm_share, 1.0);
    EXPECT_GE(r->transform_share, 0.0);
    EXPECT_LE(r->transform_share, 1.0);
  }
  EXPECT_DOUBLE_EQ(hanpu.gm_footprint_bytes, hanpu.gm_bytes);  // each byte it moves is a distinct input or output
  EXPECT_GT(fla.gm_footprint_bytes, 2 * hanpu.gm_footprint_bytes);
  EXPECT_LT(hanpu.gm_share, fla.gm_share);
  EXPECT_LT(hanpu.transform_share, fla.transform_share);
}

TEST(SimLowering, DeterministicAndValidated) {
  Workload w;
  w.tokens = 1000;  // a partial last chunk
  SimRecord a, b;
  ASSERT_TRUE(simulate_strategy("fla", device("hexagon-v75"), w, &a).ok());
  ASSERT_TRUE(simulate_strategy("fla", device("hexagon-v75"), w, &b).ok());
  EXPECT_EQ(a.latency_us, b.latency_us);
  EXPECT_EQ(a.engine_busy, b.engine_busy);
  SimRecord r;
  EXPECT_NE(simulate_strategy("hanpu", device("host"), w, &r).message().find("no \"sim\" section"), std::string::npos);
  EXPECT_NE(simulate_strategy("bogus", device("ascend-310p"), w, &r).message().find("unknown strategy 'bogus'"), std::string::npos);
}

}  // namespace
}  // namespace hanpu::sim
