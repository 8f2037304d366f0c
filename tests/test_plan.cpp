// The offline planner: graph passes, MAC counts, lifetimes, layout DP against the exhaustive oracle,
// device descriptions and plan JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "plan/plan.h"
#include "plan/strategy.h"

namespace hanpu::plan {
namespace {

// The shipped description, by its file (the planner's host, load_host_device, would read this machine's
// calibration where `hanpu calibrate` wrote one, and the tests must not depend on whether one was run).
Device shipped(const std::string& name) {
  Device d;
  const Status st = load_device(devices_dir() + "/" + name + ".json", &d);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return d;
}

GraphOptions passes(bool chunk_first, bool gemm_first) {
  GraphOptions o;
  o.chunk_first = chunk_first;
  o.gemm_first = gemm_first;
  return o;
}

TEST(PlanGraph, EveryPassCombinationIsAValidOrder) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (int v = 0; v < 4; ++v) {
      const Graph g = build_chunk_graph(kind, 64, 128, 96, passes(v & 1, v & 2));
      EXPECT_TRUE(check_graph(g).ok()) << kind_name(kind) << v << check_graph(g).ToString();
    }
  }
}

TEST(PlanGraph, CheckNamesTheOperatorThatReadsTooEarly) {
  Graph g = build_chunk_graph(Kind::kGdn, 64, 128, 128, passes(true, true));
  std::swap(g.ops[0], g.ops[1]);  // exp(G) before G = cumsum(g)
  const Status st = check_graph(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'eG = exp(G)' reads 'G' before it is produced"), std::string::npos) << st.message();
}

// MACs (counting rule: GEMM m n k; the unit lower-triangular inverse C (C-1) (C-2) / 6).
// FLA order:  K K^T, W = T Kb (C^2 K each) + Q K^T (C^2 K); U = T Vb, P V' (C^2 V each); W S, Q S, K^T V'
//             (C K V each); the inverse.
// GEMM-first: W is never formed (T is factored out), U = T Vb becomes V' = T R (same C^2 V), W S becomes
//             K S (same C K V): one C^2 K GEMM fewer.
TEST(PlanGraph, MacCountsBeforeAndAfterGemmFirst) {
  for (auto [C, K, V] : {std::tuple<int64_t, int64_t, int64_t>{64, 128, 128}, {32, 64, 48}}) {
    const double inv = C * (C - 1) * (C - 2) / 6.0;
    const double fla = 3.0 * C * C * K + 2.0 * C * C * V + 3.0 * C * K * V + inv;
    const double gf = 2.0 * C * C * K + 2.0 * C * C * V + 3.0 * C * K * V + inv;
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      EXPECT_EQ(build_chunk_graph(kind, C, K, V, passes(false, false)).matrix_macs(), fla);
      EXPECT_EQ(build_chunk_graph(kind, C, K, V, passes(true, false)).matrix_macs(), fla);  // reordering only
      EXPECT_EQ(build_chunk_graph(kind, C, K, V, passes(true, true)).matrix_macs(), gf);
    }
  }
  // C = 64, K = V = 128: 5,808,832 -> 5,284,544 MACs, 9.0% fewer.
  EXPECT_EQ(build_chunk_graph(Kind::kGdn, 64, 128, 128, passes(false, false)).matrix_macs(), 5808832);
}

// A device whose every memory is on chip and whose operands take 4 bytes, for hand-computed lifetimes.
Device hand_device() {
  Device d;
  d.name = "hand";
  d.operand_bytes = 4;
  d.memories = {{"VEC", 1 << 20, true}, {"MAT", 1 << 20, true}, {"ACC", 1 << 20, true}, {"GM", 1 << 30, false}};
  d.vector_mem = "VEC";
  d.matrix_operand_mem = "MAT";
  d.matrix_result_mem = "ACC";
  d.state_mem = "VEC";
  d.materialised_mem = "GM";
  return d;
}

// Graph (bytes in brackets):  X [2x4: 32 B] input; S [4x4: 64 B] state.
//   0  vector  A = f(X)        A [2x4: 32]
//   1  matrix  B = A S         B [2x4: 32]
//   2  vector  O = g(B, X)     O [2x4: 32] output
//   3  vector  S' = h(S, A)    S' [4x4: 64]
// VEC: X read by 0 and 2 -> steps 0..2 (32); A produced by 0 (vector), read by 3 -> 0..3 (32); B read by
// vector 2, produced (matrix) at 1 -> moved at 1: 1..2 (32); O produced at 2 -> 2..2 (32); S: 0..3 (its
// last read is the update at 3, so S' overwrites it in place: no extra bytes).
// Per step: 0: X+A+S = 128; 1: X+A+B+S = 160; 2: X+A+B+O+S = 192; 3: A+S = 96 -> VEC peak 192 at step 2.
// MAT: A (read by 1) 0..1 = 32, plus S, read by the matrix op at step 1 -> 96 at step 1.
// ACC: B at step 1 only -> 32.
TEST(PlanLifetime, HandComputedPeaks) {
  Graph g;
  const int X = g.add_tensor("X", 2, 4, Role::kInput), S = g.add_tensor("S", 4, 4, Role::kStateIn);
  const int A = g.add_tensor("A", 2, 4), B = g.add_tensor("B", 2, 4), O = g.add_tensor("O", 2, 4, Role::kOutput);
  const int S2 = g.add_tensor("S'", 4, 4, Role::kStateOut);
  g.state_in = S;
  g.state_out = S2;
  auto op = [&](const char* name, Engine e, std::vector<int> in, int out) {
    OpNode o;
    o.name = name;
    o.engine = e;
    o.kind = e == Engine::kMatrix ? OpKind::kGemm : OpKind::kVector;
    o.inputs = std::move(in);
    o.outputs = {out};
    g.ops.push_back(o);
  };
  op("A = f(X)", Engine::kVector, {X}, A);
  op("B = A S", Engine::kMatrix, {A, S}, B);
  op("O = g(B, X)", Engine::kVector, {B, X}, O);
  op("S' = h(S, A)", Engine::kVector, {S, A}, S2);
  ASSERT_TRUE(check_graph(g).ok());
  const LifetimeReport r = analyse_lifetimes(g, hand_device());
  EXPECT_TRUE(r.state_in_place);
  EXPECT_EQ(r.peak_bytes.at("VEC"), 192 + 0);
  EXPECT_EQ(r.peak_step.at("VEC"), 2);
  EXPECT_EQ(r.peak_bytes.at("MAT"), 32 + 64);  // S is also a matrix operand of step 1: 32 + 64 = 96
  EXPECT_EQ(r.peak_bytes.at("ACC"), 32);
  EXPECT_EQ(r.peak_bytes.count("GM"), 0u);  // off chip: not reported
  // Move the update before the output: S is still read by nothing after it, still in place; but if the
  // output read S after the update, old and new would co-reside.
  g.ops[2].inputs.push_back(S);
  std::swap(g.ops[2], g.ops[3]);
  const LifetimeReport r2 = analyse_lifetimes(g, hand_device());
  EXPECT_FALSE(r2.state_in_place);
  // step 2 (the update): X (until 3) + A (until 2) + B (1..3) + S (until 3) + S' = 32+32+32+64+64 = 224
  EXPECT_EQ(r2.peak_bytes.at("VEC"), 224);
}

TEST(PlanLifetime, ChunkFirstUpdatesInPlaceAndLowersThePeak) {
  for (const std::string dev : {"ascend-310p", "hexagon-v75", "host"}) {
    const Device d = shipped(dev);
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      const Graph gf = build_chunk_graph(kind, 64, 128, 128, passes(false, false));
      const Graph gc = build_chunk_graph(kind, 64, 128, 128, passes(true, false));
      const LifetimeReport fla = analyse_lifetimes(gf, d);
      const LifetimeReport cf = analyse_lifetimes(gc, d);
      EXPECT_FALSE(fla.state_in_place);
      EXPECT_TRUE(cf.state_in_place);
      // Never higher; at the state update strictly lower: S and S' share one buffer there, where FLA's
      // order holds both (the peak itself may lie elsewhere, e.g. in the fp32 score phase).
      EXPECT_LE(cf.peak_bytes.at(d.state_mem), fla.peak_bytes.at(d.state_mem)) << dev << kind_name(kind);
      const int64_t at_update_fla = live_bytes(gf, d, residencies(gf, d)).at(d.state_mem)[gf.producer(gf.state_out)];
      const int64_t at_update_cf = live_bytes(gc, d, residencies(gc, d)).at(d.state_mem)[gc.producer(gc.state_out)];
      EXPECT_LT(at_update_cf, at_update_fla) << dev << kind_name(kind);
    }
  }
}

TEST(PlanLifetime, FlaKernelsMaterialiseTheirHandOffs) {
  GraphOptions o = passes(false, false);
  o.kernels = KernelSplit::kFla;
  const Graph g = build_chunk_graph(Kind::kGdn, 64, 128, 128, o);
  const LifetimeReport r = analyse_lifetimes(g, shipped("ascend-310p"));
  EXPECT_GT(r.materialised_traffic_bytes, 0);
  o.kernels = KernelSplit::kFused;
  EXPECT_EQ(analyse_lifetimes(build_chunk_graph(Kind::kGdn, 64, 128, 128, o), shipped("ascend-310p"))
                .materialised_traffic_bytes,
            0);
}

// Random costs that satisfy the premises of the prunings: vector operators never faster blocked (row-wise
// ones slower), transforms cost by size only; matrix operators either anchored (blocked only) or allowed
// dense at a penalty.
class RandomCostModel : public CostModel {
 public:
  RandomCostModel(const Graph& g, std::mt19937_64& rng, bool anchored) : anchored_(anchored) {
    std::uniform_real_distribution<double> u(1, 100), pen(1, 3);
    for (const OpNode& o : g.ops) {
      const double base = u(rng);
      cost_.push_back({base, o.engine == Engine::kVector ? (o.row_wise ? base * pen(rng) : base) : base / pen(rng)});
      if (o.engine == Engine::kMatrix) cost_.back() = {base * pen(rng), base};
    }
    per_byte_ = std::uniform_real_distribution<double>(0.05, 2)(rng);
    fixed_ = std::uniform_real_distribution<double>(0, 20)(rng);
  }
  bool allowed(const Graph& g, int op, Layout l) const override {
    return !(anchored_ && g.ops[op].engine == Engine::kMatrix && l == Layout::kDense);
  }
  double op_cost(const Graph& g, int op, Layout l) const override {
    if (!allowed(g, op, l)) return std::numeric_limits<double>::infinity();
    return l == Layout::kDense ? cost_[op].first : cost_[op].second;
  }
  double transform_cost(const Graph& g, int t, Layout from, Layout to) const override {
    return from == to ? 0 : fixed_ + per_byte_ * static_cast<double>(g.tensors[t].rows * g.tensors[t].cols * 4);
  }

 private:
  bool anchored_;
  std::vector<std::pair<double, double>> cost_;
  double per_byte_ = 1, fixed_ = 0;
};

// A random LA-like chunk graph: inputs and a state, a mix of vector and matrix operators reading earlier
// tensors, vector chains, branches, and a final state update; unread intermediates become outputs.
Graph random_graph(std::mt19937_64& rng) {
  Graph g;
  const int64_t dims[] = {4, 8, 16};
  auto dim = [&] { return dims[rng() % 3]; };
  std::vector<int> avail;
  const int ninputs = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < ninputs; ++i) avail.push_back(g.add_tensor(std::string("X") + std::to_string(i), dim(), dim(), Role::kInput));
  g.state_in = g.add_tensor("S", 8, 8, Role::kStateIn);
  avail.push_back(g.state_in);
  const int nops = 5 + static_cast<int>(rng() % 9);
  for (int i = 0; i < nops; ++i) {
    OpNode o;
    const bool matrix = rng() % 100 < 35;
    o.engine = matrix ? Engine::kMatrix : Engine::kVector;
    o.kind = matrix ? OpKind::kGemm : OpKind::kVector;
    o.row_wise = rng() % 2;
    o.name = std::string("op") + std::to_string(i);
    // Prefer the newest tensor (chains), sometimes an older one (branches).
    o.inputs.push_back(rng() % 3 ? avail.back() : avail[rng() % avail.size()]);
    if (rng() % 2) o.inputs.push_back(avail[rng() % avail.size()]);
    const TensorNode& first = g.tensors[o.inputs[0]];
    const bool same = !matrix && rng() % 10 < 7;
    const int t = g.add_tensor(std::string("t") + std::to_string(i), same ? first.rows : dim(), same ? first.cols : dim());
    o.outputs = {t};
    g.ops.push_back(o);
    avail.push_back(t);
  }
  OpNode up;
  up.name = "update";
  up.engine = Engine::kVector;
  up.kind = OpKind::kVector;
  up.inputs = {g.state_in, avail.back()};
  g.state_out = g.add_tensor("S'", 8, 8, Role::kStateOut);
  up.outputs = {g.state_out};
  g.ops.push_back(up);
  for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
    if (g.tensors[t].role == Role::kIntermediate && g.consumers(t).empty()) g.tensors[t].role = Role::kOutput;
  }
  return g;
}

TEST(PlanLayout, DpFindsTheExhaustiveOptimumOnRandomGraphs) {
  std::mt19937_64 rng(2026);
  int merged = 0, settled_runs = 0;
  for (int i = 0; i < 200; ++i) {
    const Graph g = random_graph(rng);
    ASSERT_TRUE(check_graph(g).ok()) << check_graph(g).ToString();
    const RandomCostModel cm(g, rng, i % 2 == 0);
    const LayoutPlan oracle = plan_layouts_exhaustive(g, cm);
    const LayoutPlan dp = plan_layouts(g, cm);
    const LayoutPlan plain = plan_layouts(g, cm, DpOptions{false, false});
    ASSERT_TRUE(std::isfinite(oracle.cost));
    EXPECT_NEAR(dp.cost, oracle.cost, 1e-9 * oracle.cost) << "graph " << i;
    EXPECT_NEAR(plain.cost, oracle.cost, 1e-9 * oracle.cost) << "graph " << i;
    // The plan the DP reports is a real assignment with that cost.
    EXPECT_NEAR(evaluate_plan(g, cm, dp.op_layout, dp.state_layout).cost, dp.cost, 1e-9 * dp.cost);
    merged += dp.dp_states < plain.dp_states;
    settled_runs += i % 2 == 0;
  }
  EXPECT_GT(merged, 20);  // the prunings shrink the search on a good share of graphs
}

TEST(PlanLayout, DpFindsTheExhaustiveOptimumOnTheRealChunkGraphs) {
  for (const std::string& dev : shipped_devices()) {
    const Device d = shipped(dev);
    const DeviceCostModel cm(d);
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      for (int v = 0; v < 4; ++v) {
        const Graph g = build_chunk_graph(kind, 64, 128, 128, passes(v & 1, v & 2));
        const LayoutPlan dp = plan_layouts(g, cm), oracle = plan_layouts_exhaustive(g, cm);
        EXPECT_NEAR(dp.cost, oracle.cost, 1e-9 * oracle.cost) << dev << " " << kind_name(kind) << " " << v;
        EXPECT_LE(dp.cost, fixed_layouts(g, cm).cost);
      }
    }
  }
}

TEST(PlanLayout, AnchoredDevicesNeverRunAGemmDense) {
  const Device d = shipped("ascend-310p");
  const DeviceCostModel cm(d);
  const Graph g = build_chunk_graph(Kind::kKda, 64, 128, 128, passes(true, true));
  const LayoutPlan p = plan_layouts(g, cm);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (g.ops[i].engine == Engine::kMatrix) {
      EXPECT_EQ(p.op_layout[i], Layout::kBlocked) << g.ops[i].name;
    }
  }
}

// The host's GEMMs scale C's rows on their way in (matrix.scales_accumulator_rows), so the state update's
// decay costs no vector pass there; an NPU's S' is a Vector-unit pass over the state.
TEST(PlanLayout, TheUpdatesDecayRidesOnTheHostsGemm) {
  for (const std::string dev : {"host", "ascend-310p"}) {
    const Device d = shipped(dev);
    EXPECT_EQ(d.matrix_scales_accumulator, dev == "host");
    const DeviceCostModel cm(d);
    const Graph g = build_chunk_graph(Kind::kGdn, 64, 128, 128, passes(true, true));
    const auto s_new = std::find_if(g.ops.begin(), g.ops.end(), [](const OpNode& o) { return o.code == OpCode::kUpdate; });
    ASSERT_NE(s_new, g.ops.end());
    const double cost = cm.op_cost(g, static_cast<int>(s_new - g.ops.begin()), Layout::kDense);
    if (dev == "host") {
      EXPECT_EQ(cost, 0.0);
    } else {
      EXPECT_GT(cost, 0.0);
    }
  }
}

// Two FMA peaks show one speed within 20% either way (the spread of runs in one speed phase), not beyond.
TEST(PlanDevice, AnFmaPeakIsSteadyWithinTwentyPercent) {
  EXPECT_TRUE(fma_peak_steady(1.0));
  EXPECT_TRUE(fma_peak_steady(1.15));
  EXPECT_TRUE(fma_peak_steady(1 / 1.15));
  EXPECT_FALSE(fma_peak_steady(1.25));
  EXPECT_FALSE(fma_peak_steady(0.8));
  EXPECT_FALSE(fma_peak_steady(0.0));
}

// The planner's "host" is a calibration only where it measured the process's kernel set in the current
// format: an absent file is the shipped default, a stale one (older hanpu, other format, other kernel set)
// is set aside for it with a note naming the file and why, a matching one is read, a broken one is an error.
TEST(PlanDevice, TheHostIsACalibrationOnlyOfThisKernelSetAndFormat) {
  const char* was = std::getenv("HANPU_HOST_DEVICE");
  const std::optional<std::string> saved = was != nullptr ? std::optional<std::string>(was) : std::nullopt;
  std::ifstream shipped_file(devices_dir() + "/host.json");
  std::stringstream ss;
  ss << shipped_file.rdbuf();
  const std::string host_text = ss.str();
  ASSERT_EQ(host_text.front(), '{');
  const std::string path = ::testing::TempDir() + "hanpu-host-calibration.json";
  const auto write = [&](const std::string& calibration) {
    std::ofstream(path) << "{" << calibration << (calibration.empty() ? "" : ",") << host_text.substr(1);
  };
  ::setenv("HANPU_HOST_DEVICE", path.c_str(), 1);
  Device d;
  std::string note = "left over";
  std::remove(path.c_str());
  ASSERT_TRUE(load_host_device("AVX3+AMX", &d, &note).ok());
  EXPECT_EQ(d.origin, devices_dir() + "/host.json");
  EXPECT_EQ(note, "");
  const std::string current = "\"calibration\": {\"format\": " + std::to_string(kCalibrationFormat);
  write(current + ", \"kernel_set\": \"AVX3+AMX\"}");
  ASSERT_TRUE(load_host_device("AVX3+AMX", &d, &note).ok());
  EXPECT_EQ(d.origin, path);
  EXPECT_EQ(d.calibration_format, kCalibrationFormat);
  EXPECT_EQ(d.calibration_kernel_set, "AVX3+AMX");
  EXPECT_EQ(d.calibration_fma_peak_gflops, 0);  // not recorded: unknown
  EXPECT_EQ(note, "");
  // The FMA peak it ran at, when recorded: read; one that is no positive number is an error naming its field.
  write(current + ", \"kernel_set\": \"AVX3+AMX\", \"fma_peak_gflops\": 151.5}");
  ASSERT_TRUE(load_host_device("AVX3+AMX", &d, &note).ok());
  EXPECT_EQ(d.calibration_fma_peak_gflops, 151.5);
  for (const char* bad : {"0", "-3", "\"fast\""}) {
    write(current + ", \"kernel_set\": \"AVX3+AMX\", \"fma_peak_gflops\": " + bad + "}");
    const Status st = load_host_device("AVX3+AMX", &d, &note);
    EXPECT_NE(st.message().find("calibration.fma_peak_gflops"), std::string::npos) << bad << ": " << st.ToString();
  }
  const std::map<std::string, std::pair<std::string, std::string>> stale = {
      {"older", {"", "written by an older `hanpu calibrate`"}},
      {"format", {"\"calibration\": {\"format\": 1, \"kernel_set\": \"AVX3+AMX\"}", "has calibration format 1"}},
      {"set",
       {current + ", \"kernel_set\": \"AVX3+BF16\"}",
        "measured the kernel set AVX3+BF16, this process runs AVX3+AMX"}}};
  for (const auto& [what, c] : stale) {
    write(c.first);
    ASSERT_TRUE(load_host_device("AVX3+AMX", &d, &note).ok()) << what;
    EXPECT_EQ(d.origin, devices_dir() + "/host.json") << what;
    EXPECT_NE(note.find(path), std::string::npos) << what << ": " << note;
    EXPECT_NE(note.find(c.second), std::string::npos) << what << ": " << note;
    EXPECT_NE(note.find("re-run `hanpu calibrate`"), std::string::npos) << what << ": " << note;
  }
  // A calibration object that says nothing usable is an error naming its field.
  write("\"calibration\": {\"format\": 0, \"kernel_set\": \"AVX3\"}");
  Status st = load_host_device("AVX3", &d, &note);
  EXPECT_NE(st.message().find("calibration.format"), std::string::npos) << st.ToString();
  write(current + ", \"kernel_set\": \"\"}");
  st = load_host_device("AVX3", &d, &note);
  EXPECT_NE(st.message().find("calibration.kernel_set"), std::string::npos) << st.ToString();
  std::ofstream(path) << "{ not json";
  EXPECT_FALSE(load_host_device("AVX3", &d, &note).ok());  // named by HANPU_HOST_DEVICE: an error
  std::remove(path.c_str());
  // The cache's own file (no HANPU_HOST_DEVICE) that does not load is set aside with a note instead.
  const char* xdg_was = std::getenv("XDG_CACHE_HOME");
  const std::optional<std::string> xdg_saved = xdg_was != nullptr ? std::optional<std::string>(xdg_was) : std::nullopt;
  const std::string cache = ::testing::TempDir() + "hanpu-cache-test";
  std::filesystem::create_directories(cache + "/hanpu");
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  ::unsetenv("HANPU_HOST_DEVICE");
  std::ofstream(cache + "/hanpu/host.json") << "{ trunc";
  ASSERT_TRUE(load_host_device("AVX3", &d, &note).ok()) << note;
  EXPECT_EQ(d.origin, devices_dir() + "/host.json");
  EXPECT_NE(note.find(cache + "/hanpu/host.json does not load ("), std::string::npos) << note;
  EXPECT_NE(note.find("re-run `hanpu calibrate`"), std::string::npos) << note;
  std::filesystem::remove_all(cache);
  if (xdg_saved) {
    ::setenv("XDG_CACHE_HOME", xdg_saved->c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
  if (saved) {
    ::setenv("HANPU_HOST_DEVICE", saved->c_str(), 1);
  } else {
    ::unsetenv("HANPU_HOST_DEVICE");
  }
}

// Where calibrate writes and "host" looks: $HANPU_HOST_DEVICE, else the XDG cache, else ~/.cache; an empty
// variable counts as unset.
TEST(PlanDevice, TheCalibratedHostPathSkipsEmptyVariables) {
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* v : {"HANPU_HOST_DEVICE", "XDG_CACHE_HOME", "HOME"}) {
    const char* x = std::getenv(v);
    saved[v] = x != nullptr ? std::optional<std::string>(x) : std::nullopt;
  }
  ::setenv("HANPU_HOST_DEVICE", "/d/h.json", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(calibrated_host_path(), "/d/h.json");
  ::setenv("HANPU_HOST_DEVICE", "", 1);
  EXPECT_EQ(calibrated_host_path(), "/x/hanpu/host.json");
  ::setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(calibrated_host_path(), "/home/u/.cache/hanpu/host.json");
  ::unsetenv("HOME");
  EXPECT_EQ(calibrated_host_path(), "host-calibrated.json");
  for (const auto& [v, x] : saved) {
    if (x) {
      ::setenv(v.c_str(), x->c_str(), 1);
    } else {
      ::unsetenv(v.c_str());
    }
  }
}

TEST(PlanDevice, EveryShippedDeviceLoads) {
  const std::vector<std::string> names = shipped_devices();
  for (const char* want : {"ascend-310p", "ascend-310p3", "ascend-310b", "hexagon-v75", "host"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) {
    const Device d = shipped(n);
    EXPECT_EQ(d.name, n);
    EXPECT_NE(d.memory(d.state_mem), nullptr);
  }
}

// plan::op_cycles spreads the chunk's cost over its operators (transforms with the operator before which
// they are made, the chunk-end ones with the last): the parts sum to the plan's cost on every shipped
// device, in exact and bf16 precision (the CPU's), for DP and fixed layouts.
TEST(PlanLayout, OperatorCyclesSumToThePlansCost) {
  for (const std::string& name : shipped_devices()) {
    const Device d = shipped(name);
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      for (int mode = 0; mode < 4; ++mode) {
        PlanOptions po;
        po.layout_plan = mode != 1;
        po.bf16 = mode >= 2;
        po.packing = mode == 3 ? Packing::kNeverKeep : Packing::kPlanned;
        if (po.bf16 && d.matrix_requires_blocked) continue;  // refused (an NPU)
        Plan p;
        ASSERT_TRUE(make_plan(kind, d, po, &p).ok()) << name << " mode " << mode;
        const std::vector<double> c = op_cycles(p, d);
        ASSERT_EQ(c.size(), p.graph.ops.size());
        double sum = 0;
        for (double x : c) {
          EXPECT_TRUE(std::isfinite(x) && x >= 0) << name << " " << x;
          sum += x;
        }
        EXPECT_NEAR(sum, p.layouts.cost, 1e-9 * p.layouts.cost) << name << " " << kind_name(kind) << " mode " << mode;
      }
    }
  }
}

// The host's measured solve rate and chunk-row costs (hanpu calibrate): the solve at its own rate, the rows'
// load with the gate cumsum and their store with O, constants of every layout, so the plan is the same and
// its cost grows by exactly them; op_cycles files them with those operators (the load and store parts). The
// rows' trip from memory is beside the plan, not in its cost: the graph's input and output bytes at its
// rate (step_memory_cycles), nothing where the description does not give one (the shipped host, the NPUs).
TEST(PlanLayout, HostChunkRowsAndSolveRateMoveTheEstimateNotThePlan) {
  const Device base = shipped("host");
  Device d = base;
  d.solve_macs_per_cycle = 2.5;
  d.rows_load_bytes_per_cycle = 8;
  d.rows_store_bytes_per_cycle = 16;
  d.rows_memory_bytes_per_cycle = 32;
  Plan npu;
  ASSERT_TRUE(make_plan(Kind::kGdn, shipped("ascend-310p"), PlanOptions{}, &npu).ok());
  EXPECT_EQ(step_memory_cycles(npu, shipped("ascend-310p")), 0);
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (bool bf16 : {false, true}) {
      PlanOptions po;
      po.bf16 = bf16;
      Plan p0, p1;
      ASSERT_TRUE(make_plan(kind, base, po, &p0).ok());
      ASSERT_TRUE(make_plan(kind, d, po, &p1).ok());
      EXPECT_EQ(p0.layouts.op_layout, p1.layouts.op_layout) << kind_name(kind);
      const int64_t C = p1.graph.C, K = p1.graph.K, V = p1.graph.V, w = kind == Kind::kKda ? K : 1;
      const double solve = C * (C - 1.0) * (C - 2.0) / 6.0;
      const double load = (2.0 * C * K + C * V + C * w + C) * 4 / 8, store = C * V * 4.0 / 16;
      EXPECT_EQ(step_memory_cycles(p0, base), 0);
      EXPECT_NEAR(step_memory_cycles(p1, d), load * 8 / 32 + store * 16 / 32, 1e-9 * load) << kind_name(kind);
      const double extra = load + store + solve / 2.5 - solve / base.matrix_macs_per_cycle;
      EXPECT_NEAR(p1.layouts.cost - p0.layouts.cost, extra, 1e-9 * p1.layouts.cost) << kind_name(kind) << " " << bf16;
      const std::vector<double> c0 = op_cycles(p0, base), c1 = op_cycles(p1, d);
      for (std::size_t i = 0; i < c1.size(); ++i) {
        const OpCode code = p1.graph.ops[i].code;
        const double want = code == OpCode::kCumsum ? load : code == OpCode::kO ? store : 0;
        if (code == OpCode::kSolve) continue;
        EXPECT_NEAR(c1[i] - c0[i], want, 1e-9 * (c1[i] + 1)) << p1.graph.ops[i].name;
      }
    }
  }
}

// A description with a base is the base with the given fields merged over it: 310P3 is the 310P with
// 8 cores. Bases must be shipped devices and may not chain.
TEST(PlanDevice, BasePlusOverride) {
  const Device p = shipped("ascend-310p"), p3 = shipped("ascend-310p3");
  EXPECT_EQ(p3.cores, 8);
  EXPECT_EQ(p.cores, 10);
  // Clock and cores from one source (the card's fp16 peak): the same peak over 8 or 10 cores.
  EXPECT_NEAR(p3.clock_ghz * p3.cores, p.clock_ghz * p.cores, 1e-3);
  EXPECT_EQ(p3.memories.size(), p.memories.size());
  EXPECT_EQ(p3.sim.queues.matrix, "Cube");
  EXPECT_EQ(p3.sim.queues.matrix_out, "Vector");  // 310P relays results through the Vector unit
  EXPECT_EQ(shipped("ascend-310b").sim.queues.matrix_out, "FixPipe");
  Device d;
  EXPECT_EQ(parse_device(R"({"schema": "hanpu-device/1", "base": "nope"})", "x.json", &d).message(),
            "x.json: base: unknown device 'nope'");
  EXPECT_EQ(parse_device(R"({"schema": "hanpu-device/1", "base": "ascend-310p3"})", "x.json", &d).message(),
            "x.json: base 'ascend-310p3' has a base itself");
  EXPECT_EQ(parse_device(R"({"base": "../devices/ascend-310p"})", "x.json", &d).message(),
            "x.json: base: unknown device '../devices/ascend-310p'");
  EXPECT_EQ(parse_device(R"({"base": "ascend-310p", "cores": {"value": 0, "source": "s"}})", "x.json", &d).message(),
            "x.json: cores.value: expected an integer in 1..4096");
}

TEST(PlanDevice, MalformedDescriptionsNameTheField) {
  std::ifstream f(devices_dir() + "/ascend-310p.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json good = nlohmann::json::parse(ss.str());
  auto error_of = [&](auto mutate) {
    nlohmann::json j = good;
    mutate(j);
    Device d;
    const Status st = parse_device(j.dump(), "x.json", &d);
    return st.ok() ? std::string("ok") : st.message();
  };
  EXPECT_EQ(error_of([](nlohmann::json&) {}), "ok");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["matrix"]["macs_per_cycle"].erase("source"); }),
            "x.json: matrix.macs_per_cycle.source: missing");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["matrix"]["macs_per_cycle"]["value"] = -1; }),
            "x.json: matrix.macs_per_cycle.value: expected a positive number");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["placement"]["state"] = "L9"; }),
            "x.json: placement.state: 'L9' is not one of the memories");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["memories"][1]["on_chip"] = "yes"; }),
            "x.json: memories[1].on_chip: expected true or false");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j.erase("vector"); }), "x.json: vector: missing");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["schema"] = "other/2"; }),
            "x.json: schema: expected \"hanpu-device/1\"");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["sim"]["energy"].erase("pj_per_mac"); }),
            "x.json: sim.energy.pj_per_mac: missing");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["sim"]["barrier_us"]["value"] = -2; }),
            "x.json: sim.barrier_us.value: expected >= 0");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["sim"]["l0c_to_ub_via_vector"]["value"] = 1; }),
            "x.json: sim.l0c_to_ub_via_vector.value: expected true or false");
  // The optional bf16 unit's section is checked as thoroughly once present.
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["bf16_matrix"] = {{"macs_per_cycle", {{"value", 8}, {"source", "s"}}}}; }),
            "x.json: bf16_matrix.pack_bytes_per_cycle: missing");
  EXPECT_EQ(error_of([](nlohmann::json& j) {
              j["bf16_matrix"] = {{"macs_per_cycle", {{"value", 8}, {"source", "s"}}},
                                  {"pack_bytes_per_cycle", {{"value", 8}, {"source", "s"}}},
                                  {"pack_fixed_cycles", {{"value", -1}, {"source", "s"}}}};
            }),
            "x.json: bf16_matrix.pack_fixed_cycles.value: expected >= 0");
  EXPECT_EQ(error_of([](nlohmann::json& j) {
              j["bf16_matrix"] = {{"macs_per_cycle", {{"value", 8}, {"source", "s"}}},
                                  {"pack_bytes_per_cycle", {{"value", 8}, {"source", "s"}}},
                                  {"pack_fixed_cycles", {{"value", 0}, {"source", "s"}}},
                                  {"tile_k", {{"value", 0}, {"source", "s"}}}};
            }),
            "x.json: bf16_matrix.tile_k.value: expected an integer in 1..4096");
  Device d;
  EXPECT_NE(parse_device("{", "x.json", &d).message().find("not JSON"), std::string::npos);
  EXPECT_NE(load_device("no-such-device", &d).message().find("shipped: ascend-310b"), std::string::npos);
}

// An execution plan of `strategy` for 16 value heads of one 1000-token sequence on the device's cores.
Plan execution_plan(const std::string& dev, Kind kind, const std::string& strategy, int64_t heads = 16) {
  const Device d = shipped(dev);
  MapRequest req;
  req.shape.seq_tokens = {1000};
  req.shape.HV = heads;
  req.shape.workers = d.cores;
  Plan p;
  const Status st = make_execution_plan(kind, d, strategy, PlanOptions{}, req, &p);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return p;
}

TEST(PlanJson, RoundTripsExactly) {
  for (const std::string dev : {"ascend-310p", "host"}) {
    for (Kind kind : {Kind::kGdn, Kind::kKda}) {
      for (const StrategyInfo& s : strategies()) {
        const Plan p = execution_plan(dev, kind, s.name, 6);
        Plan q;
        const nlohmann::json j = plan_to_json(p);
        for (const char* field : {"steps", "macs_per_chunk", "peak_bytes", "transforms", "estimated_cost", "mapping"}) {
          EXPECT_TRUE(j.contains(field)) << field;
        }
        const Status st = plan_from_json(j.dump(), &q);
        ASSERT_TRUE(st.ok()) << st.ToString();
        EXPECT_EQ(plan_to_json(q), j);
        EXPECT_EQ(plan_report(q), plan_report(p));
      }
    }
  }
}

// The error of loading `good` after `mutate`, or "ok".
template <typename F>
std::string load_error(const nlohmann::json& good, F mutate) {
  nlohmann::json j = good;
  mutate(j);
  Plan q;
  const Status st = plan_from_json(j.dump(), &q);
  return st.ok() ? std::string("ok") : st.message();
}

TEST(PlanJson, MalformedPlansNameTheField) {
  const nlohmann::json good = plan_to_json(execution_plan("ascend-310p", Kind::kGdn, "hanpu"));
  auto error_of = [&](auto mutate) { return load_error(good, mutate); };
  EXPECT_EQ(error_of([](nlohmann::json&) {}), "ok");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j.erase("steps"); }), "steps: missing");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["steps"][3]["inputs"][0] = "Wx"; }),
            "steps[3].inputs[0]: unknown tensor 'Wx'");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["steps"][2]["layout"] = "nz"; }),
            "steps[2].layout: expected \"dense\" or \"blocked\"");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["steps"][6]["engine"] = "vector"; }),
            "steps[6].engine: a gemm step runs on the matrix engine, got 'vector'");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["steps"][6]["code"] = "KKt2"; }),
            "steps[6].code: unknown operator code 'KKt2'");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["chunk_size"] = 7.5; }), "chunk_size: expected an integer");
  EXPECT_EQ(error_of([](nlohmann::json& j) { std::swap(j["steps"][0], j["steps"][1]); }),
            "steps: op 'eG = exp(G)' reads 'G' before it is produced");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["schema"] = "hanpu-plan/0"; }), "schema: expected \"hanpu-plan/2\"");
  EXPECT_NE(error_of([](nlohmann::json& j) { j["schema"] = "hanpu-plan/1"; }).find("no mapping"), std::string::npos);
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["mapping"]["items"][0][1] = 99; }),
            "mapping.items[0]: worker 99 (the plan has 10)");
  // A plan names its device file; only a regular file is read (a device or a pipe would never end).
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["device_file"] = "/dev/zero"; }),
            "device: device file /dev/zero cannot be read");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["mapping"]["items"].erase(3); }),
            "mapping.items: 15 items cannot cover 16 units");
  EXPECT_NE(error_of([](nlohmann::json& j) { j["mapping"]["items"][3][4] = 1; }).find("mapping.items[3]"),
            std::string::npos);  // a head item that does not start at the first chunk
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["strategy"] = "flq"; }),
            "unknown strategy 'flq' (known: native, fla, fla-megakernel, flashqla, hanpu, +fusion, +tail-split, "
            "+chunk-first, +gemm-first, +layout-plan)");
}

// Derived fields are recomputed on load; a plan whose stored values disagree (edited by hand, or written by
// an older planner) is refused, naming the field.
// The baselines run their projects' own kernels: FLA's five (cumsum | kkt + solve | wy | fwd_h | fwd_o,
// the first three one phase of three launches), FlashQLA's cumsum | kkt + solve, then W, U, the state and
// the output fused by segment, so W and U never reach memory there. A phase's launches must split its
// kernels exactly.
TEST(PlanStrategy, BaselinesRunTheirProjectsKernels) {
  auto kernel_of = [](const Graph& g, Value v) {
    for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
      if (g.tensors[t].value == v) return g.ops[g.producer(t)].kernel;
    }
    return -1;
  };
  auto handed_off = [](const Graph& g, Value v) {
    for (int t = 0; t < static_cast<int>(g.tensors.size()); ++t) {
      if (g.tensors[t].value != v) continue;
      const int p = g.producer(t);
      for (int c : g.consumers(t)) {
        if (p < 0 || g.ops[c].kernel != g.ops[p].kernel) return true;
      }
    }
    return false;
  };
  const Plan fla = execution_plan("ascend-310p", Kind::kGdn, "fla");
  EXPECT_EQ(kernel_of(fla.graph, Value::kG), 0);
  EXPECT_EQ(kernel_of(fla.graph, Value::kT), 1);
  EXPECT_EQ(kernel_of(fla.graph, Value::kKKt), 1);
  EXPECT_EQ(kernel_of(fla.graph, Value::kW), 2);
  EXPECT_EQ(kernel_of(fla.graph, Value::kU), 2);
  EXPECT_EQ(kernel_of(fla.graph, Value::kSnew), 3);
  EXPECT_EQ(kernel_of(fla.graph, Value::kO), 4);
  for (Value v : {Value::kG, Value::kT, Value::kW, Value::kU, Value::kVn, Value::kS}) {
    EXPECT_TRUE(handed_off(fla.graph, v)) << value_name(v);
  }
  EXPECT_FALSE(handed_off(fla.graph, Value::kA));  // kkt and the solve are one kernel
  ASSERT_EQ(fla.mapping.phases.size(), 3u);
  EXPECT_EQ(fla.mapping.phases[0].launches, (std::vector<unsigned>{1, 2, 4}));
  EXPECT_EQ(fla.mapping.phases[1].kernels, 8u);
  EXPECT_EQ(fla.mapping.phases[2].kernels, 16u);
  const Plan qla = execution_plan("ascend-310p", Kind::kGdn, "flashqla");
  EXPECT_EQ(kernel_of(qla.graph, Value::kW), 2);
  EXPECT_EQ(kernel_of(qla.graph, Value::kSnew), 2);
  EXPECT_EQ(kernel_of(qla.graph, Value::kO), 3);
  EXPECT_TRUE(handed_off(qla.graph, Value::kT));
  EXPECT_EQ(qla.mapping.phases[0].launches, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(qla.mapping.phases.back().kernels, 4u | 8u);  // the segment pass: one launch of both
  EXPECT_TRUE(qla.mapping.phases.back().launches.empty());
  // W and U go straight from their GEMMs to the state update inside that launch.
  for (Value v : {Value::kW, Value::kU}) {
    for (int t = 0; t < static_cast<int>(qla.graph.tensors.size()); ++t) {
      if (qla.graph.tensors[t].value != v) continue;
      for (int c : qla.graph.consumers(t)) EXPECT_TRUE((qla.mapping.phases.back().kernels >> qla.graph.ops[c].kernel) & 1u);
    }
  }
  const nlohmann::json good = plan_to_json(fla);
  EXPECT_NE(load_error(good, [](nlohmann::json& j) { j["mapping"]["phases"][0]["launches"] = {1, 1}; })
                .find("launches: expected disjoint"),
            std::string::npos);
  EXPECT_NE(load_error(good, [](nlohmann::json& j) { j["mapping"]["phases"][0]["launches"] = {1, 2}; })
                .find("launches"),
            std::string::npos);  // kernel 2 left out
}

TEST(PlanJson, StaleDerivedFieldsAreRefused) {
  const nlohmann::json good = plan_to_json(execution_plan("ascend-310p", Kind::kGdn, "hanpu"));
  auto error_of = [&](auto mutate) { return load_error(good, mutate); };
  const int64_t ub = good["peak_bytes"]["UB"].get<int64_t>();
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["peak_bytes"]["UB"] = 1; }),
            "peak_bytes.UB: stored 1, the plan recomputes " + std::to_string(ub));
  EXPECT_EQ(error_of([](nlohmann::json& j) { j.erase("peak_bytes"); }), "peak_bytes: missing");  // found by fuzzing
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["peak_bytes"] = 3; }), "peak_bytes: expected an object keyed by memory name");
  EXPECT_EQ(error_of([](nlohmann::json& j) { j["state_in_place"] = false; }),
            "state_in_place: stored false, the plan recomputes true");
  EXPECT_NE(error_of([](nlohmann::json& j) { j["estimated_cost"]["cycles_per_chunk"] = 1.0; }).find(
                "estimated_cost.cycles_per_chunk: stored 1.0"),
            std::string::npos);
  EXPECT_NE(error_of([](nlohmann::json& j) { j["transforms"][0]["before_step"] = 3; }).find("transforms[0]: stored"),
            std::string::npos);
  EXPECT_NE(error_of([](nlohmann::json& j) { j["transforms"].erase(0); }).find("transforms: stored"), std::string::npos);
  // A step moved to a layout its device does not allow is refused, not re-costed.
  EXPECT_NE(error_of([](nlohmann::json& j) {
              for (auto& s : j["steps"]) {
                if (s["kind"] == "gemm") s["layout"] = "dense";
              }
            }).find("not allowed"),
            std::string::npos);
}

TEST(PlanJson, PassesChangeThePlan) {
  const Device d = shipped("ascend-310p");
  Plan all, none;
  ASSERT_TRUE(make_plan(Kind::kGdn, d, PlanOptions{}, &all).ok());
  PlanOptions off;
  off.reorder = off.gemm_first = off.layout_plan = false;
  ASSERT_TRUE(make_plan(Kind::kGdn, d, off, &none).ok());
  EXPECT_LT(all.graph.matrix_macs(), none.graph.matrix_macs());
  EXPECT_LT(all.layouts.cost, none.layouts.cost);
  EXPECT_TRUE(all.lifetimes.state_in_place);
  EXPECT_FALSE(none.lifetimes.state_in_place);
  PlanOptions bad;
  bad.C = 48;
  EXPECT_FALSE(make_plan(Kind::kGdn, d, bad, &none).ok());
}

}  // namespace
}  // namespace hanpu::plan
