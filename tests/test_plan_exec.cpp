// The CPU engine running planner plans (EngineConfig::plan): every pass combination meets the accuracy
// bars, a plan loaded from JSON runs bit-identically to the in-memory one, a changed plan changes what
// runs, and plans that do not fit the problem or the engine are refused with a reason.
#include <gtest/gtest.h>

#include "exec/chunk_program.h"
#include "hanpu/engine.h"
#include "plan/plan.h"
#include "test_util.h"
#include "verify/verify.h"

namespace hanpu {
namespace {

struct Case {
  Kind kind;
  int64_t C, K, V;
};

// A head-level execution plan for one sequence of T tokens and HV value heads on two workers.
std::shared_ptr<const plan::Plan> make(Kind kind, int64_t C, int64_t K, int64_t V, bool reorder, bool gemm_first,
                                       bool layout_plan, int64_t T, int64_t HV, const std::string& device = "host",
                                       bool bf16 = false) {
  plan::Device d;
  EXPECT_TRUE(plan::load_device(device, &d).ok());
  plan::PlanOptions o;
  o.C = C;
  o.K = K;
  o.V = V;
  o.bf16 = bf16;
  plan::MapRequest req;
  req.shape.seq_tokens = {T};
  req.shape.C = C;
  req.shape.HV = HV;
  req.shape.V = V;
  req.shape.workers = 2;
  const plan::StrategyOptions so{plan::Dataflow::kHeadLevel, true, reorder, gemm_first, layout_plan};
  auto p = std::make_shared<plan::Plan>();
  const Status st = plan::make_execution_plan(kind, d, "hanpu", so, o, req, p.get());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return p;
}

struct EngineRun {
  Tensor o, s;
  RunStats stats;
  Status status;
};

EngineRun run(const TensorFile& f, Kind kind, int64_t C, std::shared_ptr<const plan::Plan> pl, int threads = 2,
              Precision precision = Precision::kAuto) {
  Inputs in;
  EXPECT_TRUE(bind_inputs(f, &in).ok());
  Options opt;
  opt.kind = kind;
  opt.chunk_size = static_cast<int>(C);
  opt.precision = precision;
  const auto& q = f.tensors.at("q");
  const auto& v = f.tensors.at("v");
  EngineRun r;
  r.o = Tensor(DType::kF32, {q.shape[0], q.shape[1], v.shape[2], v.shape[3]});
  r.s = Tensor(DType::kF32, {q.shape[0], v.shape[2], q.shape[3], v.shape[3]});
  EngineConfig cfg;
  cfg.threads = threads;
  cfg.plan = std::move(pl);
  r.status = engine_forward(in, opt, cfg, Outputs{r.o.view(), r.s.view()}, &r.stats);
  return r;
}

TEST(PlanExec, EveryPassCombinationMeetsTheBars) {
  for (const Case c : {Case{Kind::kGdn, 64, 32, 24}, Case{Kind::kKda, 32, 16, 40}}) {
    TensorFile f = testing::small_problem(c.kind, DType::kF32, 1, 150, 3, 3, c.K, c.V, 11);
    f.tensors["initial_state"] = [&] {
      std::mt19937_64 rng(3);
      return testing::random_tensor(DType::kF32, {1, 3, c.K, c.V}, rng, 0.1);
    }();
    Options opt;
    opt.kind = c.kind;
    opt.chunk_size = static_cast<int>(c.C);
    Inputs in;
    testing::Result ref;
    ASSERT_TRUE(testing::bind_with_reference(f, opt, &in, &ref).ok());
    for (int v = 0; v < 8; ++v) {
      const EngineRun r = run(f, c.kind, c.C, make(c.kind, c.C, c.K, c.V, v & 1, v & 2, v & 4, 150, 3));
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_LE(testing::nmse_of(r.o, ref.o), 1e-10) << kind_name(c.kind) << " variant " << v;
      EXPECT_LE(testing::nmse_of(r.s, ref.state), 1e-10) << kind_name(c.kind) << " variant " << v;
      EXPECT_EQ(r.stats.chunk_program.find("in place") != std::string::npos, (v & 1) || (v & 2)) << r.stats.chunk_program;
    }
  }
}

TEST(PlanExec, APlanLoadedFromJsonRunsBitIdentically) {
  const TensorFile f = testing::small_problem(Kind::kGdn, DType::kBF16, 1, 200, 2, 4, 32, 32, 12);
  for (bool gemm_first : {false, true}) {
    const auto pl = make(Kind::kGdn, 64, 32, 32, true, gemm_first, true, 200, 4, "host", true);  // bf16 inputs
    auto loaded = std::make_shared<plan::Plan>();
    ASSERT_TRUE(plan::plan_from_json(plan::plan_to_json(*pl).dump(), loaded.get()).ok());
    const EngineRun a = run(f, Kind::kGdn, 64, pl, 2, Precision::kBf16);
    const EngineRun b = run(f, Kind::kGdn, 64, loaded, 2, Precision::kBf16);
    ASSERT_TRUE(a.status.ok() && b.status.ok());
    EXPECT_EQ(a.o.bytes, b.o.bytes);
    EXPECT_EQ(a.s.bytes, b.s.bytes);
    EXPECT_EQ(a.stats.chunk_program, b.stats.chunk_program);
  }
}

TEST(PlanExec, TheDefaultPlanIsTheSwitchesPlan) {
  const TensorFile f = testing::small_problem(Kind::kKda, DType::kF32, 1, 130, 2, 2, 32, 16, 13);
  const EngineRun with_plan = run(f, Kind::kKda, 64, make(Kind::kKda, 64, 32, 16, true, true, false, 130, 2));
  const EngineRun without = run(f, Kind::kKda, 64, nullptr);
  EXPECT_EQ(with_plan.o.bytes, without.o.bytes);
  EXPECT_EQ(with_plan.stats.chunk_program, without.stats.chunk_program);
  EXPECT_EQ(without.stats.chunk_program, "Ke KS Qs QS R V'=TR PV O Kd KtV S' (row-major, in place)");
}

TEST(PlanExec, AChangedPlanChangesWhatRuns) {
  const TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 140, 2, 2, 32, 32, 14);
  auto pl = make(Kind::kGdn, 64, 32, 32, true, true, false, 140, 2);
  auto moved = std::make_shared<plan::Plan>(*pl);
  // Move "QS = Qs S" after "PV = P V'": P V' no longer accumulates onto Q S.
  auto& ops = moved->graph.ops;
  auto& lay = moved->layouts.op_layout;
  auto find = [&](const char* out) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (moved->graph.tensors[ops[i].outputs[0]].name == out) return static_cast<std::ptrdiff_t>(i);
    }
    return std::ptrdiff_t{-1};
  };
  const std::ptrdiff_t qs = find("QS"), pv = find("PV");
  ASSERT_LT(qs, pv);
  std::rotate(ops.begin() + qs, ops.begin() + qs + 1, ops.begin() + pv + 1);
  std::rotate(lay.begin() + qs, lay.begin() + qs + 1, lay.begin() + pv + 1);
  ASSERT_TRUE(plan::check_graph(moved->graph).ok());
  // And pack the update's operand.
  lay[find("KtV")] = plan::Layout::kBlocked;
  const EngineRun a = run(f, Kind::kGdn, 64, pl), b = run(f, Kind::kGdn, 64, moved);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(b.stats.chunk_program, "Ke KS Qs R V'=TR PV QS O Kd KtV S' (packed, in place)");
  EXPECT_NE(a.stats.chunk_program, b.stats.chunk_program);
  EXPECT_LE(testing::nmse_of(b.o, a.o), 1e-12);  // the same maths, summed in another order
  // P V' needs its own [C, V] buffer; the packed update needs no row-major Kd [C, K] (one per thread).
  EXPECT_EQ(b.stats.peak_workspace_bytes, a.stats.peak_workspace_bytes + 2 * (64 * 32 - 64 * 32) * 4);
}

TEST(PlanExec, PlansThatDoNotFitAreRefused) {
  const TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 70, 2, 2, 32, 32, 15);
  EngineRun r = run(f, Kind::kGdn, 64, make(Kind::kKda, 64, 32, 32, true, true, false, 70, 2));
  EXPECT_EQ(r.status.message(), "plan kind is kda, the problem's is gdn");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 32, 32, 32, true, true, false, 70, 2));
  EXPECT_EQ(r.status.message(), "plan chunk size is 32, the problem's is 64");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 64, 32, 16, true, true, false, 70, 2));
  EXPECT_EQ(r.status.message(), "plan V is 16, the problem's is 32");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 64, 32, 32, true, true, false, 71, 2));
  EXPECT_EQ(r.status.message(), "plan sequence lengths is 71 (1 sequences), the problem's is 70 (1 sequences)");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 64, 32, 32, true, true, false, 70, 4));
  EXPECT_EQ(r.status.message(), "plan value heads is 4, the problem's is 2");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 64, 32, 32, true, true, false, 70, 2), 3);
  EXPECT_EQ(r.status.message(), "plan worker count is 2, the problem's is threads=3");
  const auto bf16_plan = make(Kind::kGdn, 64, 32, 32, true, true, false, 70, 2, "host", true);
  r = run(f, Kind::kGdn, 64, bf16_plan, 2, Precision::kExact);
  EXPECT_EQ(r.status.message(), "plan precision is bf16, the problem's is exact");
  r = run(f, Kind::kGdn, 64, bf16_plan);  // auto on f32 inputs: exact, and the message says where it came from
  EXPECT_EQ(r.status.message(), "plan precision is bf16, the problem's is exact (precision auto's choice for these "
                                "inputs here; give the plan's precision explicitly)");
  r = run(f, Kind::kGdn, 64, make(Kind::kGdn, 64, 32, 32, true, true, true, 70, 2, "ascend-310p"));
  EXPECT_NE(r.status.message().find("vector step on blocked tiles"), std::string::npos) << r.status.message();
}

// The executor runs the plan's edges: a plan whose operands are swapped (R reading Q S instead of K S, or
// O reading K S instead of Q S, or both) is refused, naming the step and the operand, in memory and from
// a file — it can neither run silently as the default plan nor compute something else.
TEST(PlanExec, SwappedOperandsAreRefused) {
  const TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 70, 2, 2, 32, 32, 16);
  const auto pl = make(Kind::kGdn, 64, 32, 32, true, true, false, 70, 2);
  auto id = [&](const char* name) {
    for (std::size_t t = 0; t < pl->graph.tensors.size(); ++t) {
      if (pl->graph.tensors[t].name == name) return static_cast<int>(t);
    }
    return -1;
  };
  const int ks = id("KS"), qs = id("QS");
  for (int which = 1; which <= 3; ++which) {
    auto swapped = std::make_shared<plan::Plan>(*pl);
    for (plan::OpNode& o : swapped->graph.ops) {
      for (int& t : o.inputs) {
        if ((which & 1) && o.code == plan::OpCode::kR && t == ks) t = qs;
        else if ((which & 2) && o.code == plan::OpCode::kO && t == qs) t = ks;
      }
    }
    const EngineRun r = run(f, Kind::kGdn, 64, swapped);
    const std::string want = which & 1 ? "(R): operand 1 is 'QS', its signature is (V, KS, beta)"
                                       : "(O): operand 0 is 'KS', its signature is (QS, PV)";
    EXPECT_NE(r.status.message().find(want), std::string::npos) << which << ": " << r.status.message();
    plan::Plan loaded;
    const Status st = plan::plan_from_json(plan::plan_to_json(*swapped).dump(), &loaded);
    EXPECT_NE(st.message().find(want), std::string::npos) << which << ": " << st.message();
  }
  // The unswapped plan runs and matches the plan-less default bit for bit.
  const EngineRun a = run(f, Kind::kGdn, 64, pl), b = run(f, Kind::kGdn, 64, nullptr);
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.o.bytes, b.o.bytes);
}

}  // namespace
}  // namespace hanpu
