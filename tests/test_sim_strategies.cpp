// The NPU model's lowering of every strategy: buffer capacities and spills (boundary at the planned peak),
// conservation of global-memory bytes, launches, tail splitting, the 310P vector relay, energy and the
// occupancy counters of the trace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/strategy.h"
#include "sim/lower.h"
#include "sim_test_util.h"
#include "sim/native_ops.h"
#include "sim/spill.h"

namespace hanpu::sim {
namespace {

using testing::device;

using testing::with_capacity;

SimRecord simulate(const std::string& strategy, const plan::Device& d, const Workload& w, std::string* trace = nullptr) {
  SimRecord r;
  const Status st = simulate_strategy(strategy, d, w, &r, trace);
  EXPECT_TRUE(st.ok()) << strategy << ": " << st.ToString();
  return r;
}

// Capacity t = the plan's peak UB bytes: t and t + 1 need no spill; t - 1 spills, and the footprint
// after the spills fits.
TEST(SimSpill, BoundaryAtThePlannedPeak) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    plan::Device d = device("ascend-310p");
    d.load_slots = 1;  // single-buffered: no fallback to fewer slots below the peak (make_lowering)
    plan::Plan pl;
    ASSERT_TRUE(plan::make_plan(kind, d, {}, &pl).ok());
    const int64_t t = pl.lifetimes.peak_bytes.at("UB");
    for (int64_t cap : {t + 1, t, t - 1}) {
      const plan::Device dc = with_capacity(d, "UB", cap);
      SpillPlan sp;
      ASSERT_TRUE(plan_spills(pl.graph, dc, &sp).ok());
      EXPECT_LE(sp.peak_bytes.at("UB"), cap);
      if (cap >= t) {
        EXPECT_TRUE(sp.moves.empty()) << cap;
        EXPECT_EQ(sp.peak_bytes.at("UB"), t);
      } else {
        ASSERT_FALSE(sp.moves.empty());
        EXPECT_GT(sp.reload_bytes, 0);
        for (const SpillMove& m : sp.moves) EXPECT_LT(m.after_step, m.before_step);
      }
    }
    // Simulated: the spills' bytes go through global memory, and cost time.
    Workload w;
    w.kind = kind;
    w.heads = 10;
    w.tokens = 512;
    const SimRecord fits = simulate("hanpu", with_capacity(d, "UB", t), w);
    const SimRecord spills = simulate("hanpu", with_capacity(d, "UB", t - 1), w);
    EXPECT_EQ(fits.spill_bytes, 0);
    EXPECT_GT(spills.spill_bytes, 0);
    EXPECT_DOUBLE_EQ(spills.gm_bytes - fits.gm_bytes, spills.spill_bytes);
    EXPECT_GT(spills.latency_us, fits.latency_us);
    EXPECT_LE(spills.peak_bytes.at("UB"), t - 1);
  }
}

TEST(SimLowering, OversizedRunsAreRefused) {
  Workload w;
  w.heads = 4096;
  w.tokens = 65536;
  SimRecord r;
  EXPECT_NE(simulate_strategy("fla", device("ascend-310p"), w, &r).message().find("more than the model simulates"),
            std::string::npos);
}

TEST(SimSpill, AnOperatorThatCannotFitIsAnError) {
  Workload w;
  w.tokens = 128;
  SimRecord r;
  const Status st = simulate_strategy("hanpu", with_capacity(device("ascend-310p"), "UB", 4096), w, &r);
  EXPECT_NE(st.message().find("more than its capacity of 4096 bytes"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("even in 64 tiles"), std::string::npos) << st.ToString();
}

// fla moves, per (head, chunk): the graph inputs once per kernel that reads them, the output, every
// hand-off between kernels once written and once read per reading kernel (the lifetime analysis's
// count), and the chunk state h[c] (written by #5, read by #6).
TEST(SimLowering, FlaMovesTheBytesItsKernelsImply) {
  const plan::Device d = device("ascend-310p");
  plan::GraphOptions go;
  go.chunk_first = go.gemm_first = false;
  go.kernels = plan::KernelSplit::kFla;
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, go);
  double per_chunk = static_cast<double>(plan::analyse_lifetimes(g, d).materialised_traffic_bytes);
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    const plan::Role role = g.tensors[t].role;
    std::set<int> kernels;
    for (int c : g.consumers(t)) kernels.insert(g.ops[c].kernel);
    if (role == plan::Role::kInput) per_chunk += static_cast<double>(plan::tensor_bytes(g, t, d) * kernels.size());
    if (role == plan::Role::kOutput) per_chunk += static_cast<double>(plan::tensor_bytes(g, t, d));
    // S' leaves #5 as the next chunk's h[c], stored at S's size (the model's precision, as FLA stores h),
    // and #6 reads h[c] back.
    if (role == plan::Role::kStateOut) per_chunk += static_cast<double>(plan::tensor_bytes(g, g.state_in, d));
    if (role == plan::Role::kStateIn) per_chunk += static_cast<double>(plan::tensor_bytes(g, t, d));
  }
  Workload w;
  w.heads = 12;
  w.tokens = 640;
  const SimRecord r = simulate("fla", d, w);
  EXPECT_DOUBLE_EQ(r.gm_bytes, 12.0 * 10 * per_chunk);
  EXPECT_EQ(simulate("fla-megakernel", d, w).gm_bytes, r.gm_bytes);  // same dataflow, one launch
}

TEST(SimLowering, LaunchesPerStrategy) {
  Workload w;
  w.heads = 8;
  w.tokens = 1024;
  const plan::Device d = device("ascend-310p");
  const std::map<std::string, int64_t> launches = {
      {"native", native_program(Kind::kGdn, 64, 128, 128).launches(16)}, {"fla", 5}, {"fla-megakernel", 1},
      {"flashqla", 5}, {"hanpu", 1}};
  for (const auto& [s, n] : launches) EXPECT_EQ(simulate(s, d, w).launches, n) << s;
  // A launch costs more than a barrier on every shipped device: the megakernel is not slower.
  EXPECT_LE(simulate("fla-megakernel", d, w).latency_us, simulate("fla", d, w).latency_us);
}

// native runs transformers' torch-native chunked algorithm one framework operator at a time: the solve is a
// loop of six small vector operators per row, the recurrence eighteen operators per chunk (five of them
// matrix), so a 4,096-token prefill is over a thousand launches, each paying the framework's dispatch.
TEST(SimLowering, NativeIsOneLaunchPerFrameworkOperator) {
  const NativeProgram p = native_program(Kind::kGdn, 64, 128, 128);
  int solve = 0, loop_matrix = 0;
  for (const FrameworkOp& op : p.before) solve += op.name.rfind("solve ", 0) == 0;
  for (const FrameworkOp& op : p.per_chunk) loop_matrix += op.matrix;
  EXPECT_EQ(solve, 6 * 63);
  EXPECT_EQ(p.per_chunk.size(), 18u);
  EXPECT_EQ(loop_matrix, 5);
  EXPECT_GT(p.launches(64), 1000);
  const plan::Device d = device("ascend-310p");
  Workload w;
  w.heads = 16;
  w.tokens = 4096;
  const SimRecord r = simulate("native", d, w);
  EXPECT_EQ(r.launches, p.launches(64));
  // Every launch pays the dispatch: the latency is at least launches x framework_op_us.
  EXPECT_GE(r.latency_us, static_cast<double>(r.launches) * d.sim.framework_op_us);
  // Its matrix work is the algebra's: per (head, chunk) k_beta k^T, A v_beta, A (k_beta e^g), and per chunk
  // q k^T, k_cumdecay S, (q e^g) S, P V', (k decay)^T V'.
  const double per_unit = 2 * (64.0 * 64 * 128) + 3 * (64.0 * 128 * 64) + 2 * (64.0 * 128 * 128) + 128.0 * 128 * 64;
  EXPECT_DOUBLE_EQ(r.matrix_macs, 16.0 * 64 * per_unit);
  // Nothing stays on chip between operators: every result goes to global memory.
  EXPECT_GT(r.gm_bytes, 5 * simulate("fla", d, w).gm_bytes);
}

// 4 heads on 10 cores: whole heads leave 6 cores idle; column slices of the tail heads use them. 20
// heads on 10 cores have no tail.
TEST(SimLowering, TailHeadsAreSplitAlongV) {
  const plan::Device d = device("ascend-310p");
  Workload w;
  w.heads = 4;
  w.tokens = 1024;
  const SimRecord whole = simulate("+fusion", d, w), split = simulate("+tail-split", d, w);
  EXPECT_EQ(whole.tail_split, 1);
  EXPECT_GT(split.tail_split, 1);
  EXPECT_LT(split.latency_us, whole.latency_us);
  EXPECT_GT(split.matrix_macs, whole.matrix_macs);  // the V-independent steps run once per slice
  w.heads = 20;
  EXPECT_EQ(simulate("hanpu", d, w).tail_split, 1);
}

// On 310P matrix results reach UB through the Vector unit: no FixPipe lane; on 310B FixPipe moves them.
TEST(SimLowering, MatrixResultsRelayThroughTheVectorUnitOn310P) {
  Workload w;
  w.heads = 2;
  w.tokens = 256;
  EXPECT_EQ(simulate("hanpu", device("ascend-310p"), w).engine_busy.count("FixPipe"), 0u);
  EXPECT_GT(simulate("hanpu", device("ascend-310b"), w).engine_busy.at("FixPipe"), 0);
}

// Energy = MACs x pJ/MAC + vector cycles x pJ/cycle + global bytes x pJ/B + on-chip bytes x pJ/B, plus
// static power over the latency: raising one coefficient adds exactly its term.
TEST(SimLowering, EnergyIsTheSumOfItsTerms) {
  Workload w;
  w.heads = 10;
  w.tokens = 512;
  plan::Device d = device("ascend-310p");
  const SimRecord a = simulate("hanpu", d, w);
  EXPECT_GE(a.energy_uj, d.sim.static_w * a.latency_us);
  d.sim.pj_per_mac += 1;
  EXPECT_NEAR(simulate("hanpu", d, w).energy_uj - a.energy_uj, a.matrix_macs * 1e-6, 1e-6 * a.energy_uj);
  d.sim.pj_per_global_byte += 1;
  d.sim.pj_per_mac -= 1;
  EXPECT_NEAR(simulate("hanpu", d, w).energy_uj - a.energy_uj, a.gm_bytes * 1e-6, 1e-6 * a.energy_uj);
}

// Every strategy on every shipped device for both kinds: the same inputs give the same report (and, on
// one device, the same trace byte for byte).
TEST(SimLowering, EveryStrategyIsDeterministic) {
  for (const std::string& name : plan::shipped_devices()) {
    const plan::Device d = device(name);
    if (!d.has_sim) continue;
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      Workload w;
      w.kind = kind;
      w.heads = 3;
      w.tokens = 200;  // a partial last chunk
      for (const std::string& s : plan::names_of(plan::strategies())) {
        const bool traced = name == "ascend-310p" && kind == Kind::kGdn;
        std::string ta, tb;
        const SimRecord a = simulate(s, d, w, traced ? &ta : nullptr), b = simulate(s, d, w, traced ? &tb : nullptr);
        EXPECT_EQ(ta, tb) << name << " " << s;
        EXPECT_EQ(a.latency_us, b.latency_us);
        EXPECT_EQ(a.energy_uj, b.energy_uj);
        EXPECT_EQ(a.engine_busy, b.engine_busy);
        EXPECT_EQ(a.sim_peak_bytes, b.sim_peak_bytes);
        EXPECT_GT(a.energy_uj, 0);
      }
    }
  }
}

// The trace's counter tracks: one per (core, buffer), never negative, back to zero at the end, and their
// peak is the record's simulated peak.
TEST(SimLowering, OccupancyCounters) {
  Workload w;
  w.heads = 2;
  w.tokens = 256;
  std::string trace;
  const SimRecord r = simulate("hanpu", device("ascend-310p"), w, &trace);
  const auto j = nlohmann::json::parse(trace);
  std::map<std::pair<int, std::string>, int64_t> last, peak;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "C") continue;
    for (const auto& [mem, v] : e["args"].items()) {
      const int64_t b = v.get<int64_t>();
      EXPECT_GE(b, 0);
      last[{e["pid"].get<int>(), mem}] = b;
      peak[{e["pid"].get<int>(), mem}] = std::max(peak[{e["pid"].get<int>(), mem}], b);
    }
  }
  ASSERT_TRUE(peak.count({0, "UB"}));
  for (const auto& [key, b] : last) EXPECT_EQ(b, 0) << key.second;
  EXPECT_EQ(std::max(peak[{0, "UB"}], peak[{1, "UB"}]), r.sim_peak_bytes.at("UB"));
}

}  // namespace
}  // namespace hanpu::sim
