// Layout planning of the bf16 mode's packed operands (plan/packing.h): the layout DP on the bf16 cost model
// against the exhaustive search, what the planned choice keeps, the fixed choices' estimates, plan files,
// and the engine: every packing choice (and a kept V') gives the same bits.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "exec/chunk_program.h"
#include "hanpu/engine.h"
#include "kernels/tril_inverse.h"
#include "plan/packing.h"
#include "plan/plan.h"
#include "test_util.h"

namespace hanpu {
namespace {

using plan::Layout;
using plan::Packing;

// The shipped description (not a calibrated one $HANPU_HOST_DEVICE may name).
plan::Device host() {
  plan::Device d;
  EXPECT_TRUE(plan::load_device(plan::devices_dir() + "/host.json", &d).ok());
  return d;
}

plan::GraphOptions passes(bool chunk_first, bool gemm_first) {
  plan::GraphOptions o;
  o.chunk_first = chunk_first;
  o.gemm_first = gemm_first;
  return o;
}

int op_index(const plan::Graph& g, plan::OpCode c) {
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    if (g.ops[i].code == c) return i;
  }
  return -1;
}

TEST(Packing, TheDpFindsTheExhaustiveOptimum) {
  plan::Device d = host();
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> u(0.2, 5.0);
  for (int trial = 0; trial < 12; ++trial) {
    if (trial > 0) {  // rates around the shipped ones: where packing is cheap or dear against the GEMMs
      d.bf16_macs_per_cycle = 32 * u(rng);
      d.bf16_pack_bytes_per_cycle = 32 * u(rng);
      d.bf16_pack_fixed_cycles = 20 * u(rng);
      d.transform_bytes_per_cycle = 32 * u(rng);
    }
    const plan::Bf16CostModel cm(d, trial % 2 ? Kind::kKda : Kind::kGdn, kTrilBlock);
    for (int v = 0; v < 4; ++v) {
      for (int64_t C : {32, 64}) {
        const plan::Graph g = plan::build_chunk_graph(trial % 2 ? Kind::kKda : Kind::kGdn, C, 128, 96, passes(v & 1, v & 2));
        const plan::LayoutPlan dp = plan::plan_layouts(g, cm), oracle = plan::plan_layouts_exhaustive(g, cm);
        ASSERT_TRUE(std::isfinite(dp.cost));
        EXPECT_NEAR(dp.cost, oracle.cost, 1e-9 * oracle.cost) << "trial " << trial << " variant " << v << " C " << C;
        EXPECT_NEAR(plan::evaluate_plan(g, cm, dp.op_layout, dp.state_layout).cost, dp.cost, 1e-9 * dp.cost);
        EXPECT_EQ(dp.state_layout, Layout::kDense);  // a packed copy is bf16: the state stays fp32 rows
        const double never = plan::packing_layouts(g, cm, Packing::kNeverKeep).cost;
        const double always = plan::packing_layouts(g, cm, Packing::kPackAlways).cost;
        EXPECT_LE(dp.cost, never * (1 + 1e-12));
        // the row blocks' repacks cost something, where a row-blocked product packs for the bf16 unit (at a
        // bf16 rate of at most two fp32 rates the split T R and P V' run in fp32, bf16_terms)
        bool repacks = false;
        for (const plan::OpNode& o : g.ops) repacks = repacks || (cm.row_blocked(o) && cm.packs_bf16(o));
        if (repacks) {
          EXPECT_LT(never, always);
        } else {
          EXPECT_EQ(never, always);
        }
      }
    }
  }
}

TEST(Packing, TheCostModelPacksOnlyRightOperandsAndNeverUnpacks) {
  const plan::Device d = host();
  const plan::Bf16CostModel cm(d, Kind::kGdn, kTrilBlock);
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 128, 128, passes(true, true));
  const int ks = op_index(g, plan::OpCode::kKS), r = op_index(g, plan::OpCode::kR);
  ASSERT_GE(ks, 0);
  ASSERT_GE(r, 0);
  EXPECT_TRUE(cm.reads_in_layout(g, ks, g.ops[ks].inputs[1]));   // S, the right operand
  EXPECT_FALSE(cm.reads_in_layout(g, ks, g.ops[ks].inputs[0]));  // converted on the way in
  EXPECT_EQ(cm.result_layout(g, ks, Layout::kBlocked), Layout::kDense);
  EXPECT_FALSE(cm.allowed(g, r, Layout::kBlocked));  // vector steps on fp32 rows
  EXPECT_TRUE(std::isinf(cm.transform_cost(g, g.ops[ks].inputs[1], Layout::kBlocked, Layout::kDense)));
  EXPECT_GT(cm.transform_cost(g, g.ops[ks].inputs[1], Layout::kDense, Layout::kBlocked), 0);
  // A product reading its operand from a shared copy costs the pack less than one packing it itself.
  const double pack_s = cm.pack_cycles(128.0 * 128 * 4);
  EXPECT_NEAR(cm.op_cost(g, ks, Layout::kDense) - cm.op_cost(g, ks, Layout::kBlocked), pack_s, 1e-9 * pack_s);
  // KDA's scores are an exact vector split: nothing packed, dense only.
  const plan::Bf16CostModel kda(d, Kind::kKda, kTrilBlock);
  const plan::Graph gk = plan::build_chunk_graph(Kind::kKda, 64, 128, 128, passes(true, true));
  EXPECT_FALSE(kda.allowed(gk, op_index(gk, plan::OpCode::kKKt), Layout::kBlocked));
}

// A product's MACs are its dimensions padded to the unit's tile (AMX: 16 x 16 x 32 against VDPBF16PS's 1 x 16 x
// 2), and only a left operand the engine does not read as bf16 rows (T, P) costs a conversion: K S on keys
// costs its MACs whatever the packing rate, V' = T R the conversion of T on top.
TEST(Packing, ProductsPadToTheUnitsTileAndConvertOnlyFp32LeftOperands) {
  plan::Device d = host();
  d.has_bf16_matrix = true;
  d.bf16_macs_per_cycle = 16 * d.matrix_macs_per_cycle;  // AMX's class: the splits stay on the unit
  d.bf16_pack_bytes_per_cycle = 10;
  d.bf16_pack_fixed_cycles = 0;
  const plan::Graph g = plan::build_chunk_graph(Kind::kGdn, 64, 100, 40, passes(true, true));  // K 100, V 40
  const int ks = op_index(g, plan::OpCode::kKS), tr = op_index(g, plan::OpCode::kVnFromTR);
  ASSERT_GE(ks, 0);
  ASSERT_GE(tr, 0);
  const int ktv = op_index(g, plan::OpCode::kKtV);
  EXPECT_TRUE(plan::reads_bf16_rows(g.ops[ks], Layout::kBlocked));
  EXPECT_FALSE(plan::reads_bf16_rows(g.ops[tr], Layout::kDense));
  EXPECT_TRUE(plan::reads_bf16_rows(g.ops[ktv], Layout::kDense));     // the key rows, transposed in place
  EXPECT_FALSE(plan::reads_bf16_rows(g.ops[ktv], Layout::kBlocked));  // the keys' fp32 panel
  for (const auto& [rows, cols, k] : {std::array<int64_t, 3>{1, 16, 2}, {16, 16, 32}}) {
    d.bf16_tile_rows = rows;
    d.bf16_tile_cols = cols;
    d.bf16_tile_k = k;
    const plan::Bf16CostModel cm(d, Kind::kGdn, kTrilBlock);
    const auto pad = [](int64_t x, int64_t t) { return static_cast<double>((x + t - 1) / t * t); };
    // K S: [64, 100] x [100, 40], blocked (S from the shared copy), bf16 key rows: the MACs alone.
    const double ks_macs = pad(64, rows) * pad(40, cols) * pad(100, k);
    EXPECT_NEAR(cm.op_cost(g, ks, Layout::kBlocked), ks_macs / d.bf16_macs_per_cycle, 1e-9) << rows;
    // V' = T R: [64, 64] x [64, 40], row-blocked (5/8 of its MACs at C = 64), R split (two products, each
    // converting T, R's residual pass and two packings in the call).
    const double tr_macs = pad(64, rows) * pad(40, cols) * pad(64, k) * 5 / 8;
    const double t_bytes = 64.0 * 64 * 4, r_bytes = 64.0 * 40 * 4;
    const double want = 2 * (tr_macs / d.bf16_macs_per_cycle + cm.pack_cycles(t_bytes)) +
                        cm.pack_cycles(r_bytes, true);
    EXPECT_NEAR(cm.op_cost(g, tr, Layout::kDense), want, 1e-9 * want) << rows;
  }
}

// The two-term splits (plan/packing.h) in the cost model of a bf16 unit at 16 fp32 rates (AMX's class):
// V' = T R reads R split (two products), P V' both operands (three), KDA's update V' (two), every other
// product single terms; a split product costs its products, one more conversion of A per product, and a
// split operand's residual pass and second packing.
TEST(Packing, SplitProductsCostTheirTerms) {
  plan::Device d = host();
  d.has_bf16_matrix = true;
  d.bf16_macs_per_cycle = 16 * d.matrix_macs_per_cycle;
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    const plan::Bf16CostModel cm(d, kind, kTrilBlock);
    const plan::Graph g = plan::build_chunk_graph(kind, 64, 128, 128, passes(true, true));
    for (const plan::OpNode& o : g.ops) {
      const plan::Bf16Terms t = cm.terms(o);
      const int want = o.code == plan::OpCode::kVnFromTR ? 2
                       : o.code == plan::OpCode::kPV     ? 3
                       : o.code == plan::OpCode::kKtV && kind == Kind::kKda ? 2
                                                                            : 1;
      EXPECT_EQ(t.products(), want) << kind_name(kind) << " " << o.name;
    }
    // T R and P V' have one shape (64 x 128 x 64, row-blocked): their dense costs differ by one product with
    // its conversion of the 64 x 64 left operand, and P's residual pass (both pack R / V' split in the call).
    const int tr = op_index(g, plan::OpCode::kVnFromTR), pv = op_index(g, plan::OpCode::kPV);
    const double a_bytes = 64.0 * 64 * 4;
    const double one = cm.op_cost(g, pv, Layout::kDense) - cm.op_cost(g, tr, Layout::kDense);
    const double macs = 64.0 * 128 * 64 * (4 + 1) / (2 * 4);  // 4 row blocks up to the diagonal: 5/8 of the MACs
    const double want = macs / d.bf16_macs_per_cycle + cm.pack_cycles(a_bytes) + d.vector_cycles(a_bytes);
    EXPECT_NEAR(one, want, 1e-9 * want) << kind_name(kind);
    // A split operand's packed copy costs the residual pass and two packings.
    const int vn = g.ops[pv].inputs[1];
    const double b_bytes = 64.0 * 128 * 4;
    EXPECT_NEAR(cm.transform_cost(g, vn, Layout::kDense, Layout::kBlocked),
                d.vector_cycles(b_bytes) + 2 * cm.pack_cycles(b_bytes), 1e-9);
    EXPECT_TRUE(cm.split_copy(g, vn));
    EXPECT_FALSE(cm.split_copy(g, g.ops[op_index(g, plan::OpCode::kKS)].inputs[1]));  // S: single rounded
  }
}

// Where the bf16 unit's rate is at most the split's products times the fp32 unit's, a split product runs
// on fp32 operands: one product, costed by the fp32 model, dense (nothing packed), its operand no split
// copy; single-term products stay on the bf16 unit. The rule at the rates either side of each split.
TEST(Packing, SplitProductsRunInFp32WhereTheBf16UnitIsNotFasterThanTheirTerms) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (plan::OpCode code : {plan::OpCode::kVnFromTR, plan::OpCode::kPV, plan::OpCode::kKtV}) {
      const plan::Bf16Terms split = plan::bf16_terms(kind, code, 16);
      if (split.products() == 1) continue;  // GDN's update: single rounded
      EXPECT_FALSE(split.fp32);
      EXPECT_TRUE(plan::bf16_terms(kind, code, split.products()).fp32) << plan::op_code_name(code);
      EXPECT_FALSE(plan::bf16_terms(kind, code, split.products() + 0.5).fp32) << plan::op_code_name(code);
    }
    EXPECT_FALSE(plan::bf16_terms(kind, plan::OpCode::kKS, 0.5).fp32);  // single terms stay bf16 at any rate
  }
  plan::Device d = host();
  d.has_bf16_matrix = true;
  d.bf16_macs_per_cycle = 2 * d.matrix_macs_per_cycle;  // VDPBF16PS on the AMD EPYC
  const plan::Bf16CostModel cm(d, Kind::kKda, kTrilBlock);
  const plan::DeviceCostModel fp32(d);
  const plan::Graph g = plan::build_chunk_graph(Kind::kKda, 64, 128, 128, passes(true, true));
  for (plan::OpCode code : {plan::OpCode::kVnFromTR, plan::OpCode::kPV, plan::OpCode::kKtV}) {
    const int i = op_index(g, code);
    ASSERT_GE(i, 0);
    const plan::OpNode& o = g.ops[i];
    EXPECT_TRUE(cm.terms(o).fp32);
    EXPECT_EQ(cm.terms(o).products(), 1);
    EXPECT_FALSE(cm.packs_bf16(o));
    EXPECT_FALSE(cm.allowed(g, i, Layout::kBlocked));
    EXPECT_EQ(cm.op_cost(g, i, Layout::kDense), fp32.op_cost(g, i, Layout::kDense)) << o.name;
    EXPECT_TRUE(cm.reads_in_layout(g, i, o.inputs[1]));
  }
  EXPECT_FALSE(cm.split_copy(g, g.ops[op_index(g, plan::OpCode::kPV)].inputs[1]));
  EXPECT_TRUE(cm.packs_bf16(g.ops[op_index(g, plan::OpCode::kKS)]));
}

TEST(Packing, ThePlanKeepsTheOperandsSeveralProductsRead) {
  const plan::Device d = host();
  plan::PlanOptions po;
  po.bf16 = true;
  plan::Plan pl;
  ASSERT_TRUE(plan::make_plan(Kind::kGdn, d, po, &pl).ok());
  // S (K S, Q S) and K^T (K K^T, Q K^T) are packed once each and kept.
  int s_packs = 0, k_packs = 0;
  for (const plan::Transform& t : pl.layouts.transforms) {
    s_packs += pl.graph.tensors[t.tensor].value == plan::Value::kS;
    k_packs += pl.graph.tensors[t.tensor].value == plan::Value::kK;
  }
  EXPECT_EQ(s_packs, 1);
  EXPECT_EQ(k_packs, 1);
  ChunkProgram prog;
  ASSERT_TRUE(compile_chunk_program(pl.graph, pl.layouts.op_layout, pl.opt, &prog).ok());
  EXPECT_TRUE(prog.keep_state && prog.keep_keys);
  EXPECT_FALSE(prog.repack_row_blocks);
  EXPECT_NE(prog.describe().find("kept packed S K^T"), std::string::npos) << prog.describe();
  for (Packing p : {Packing::kNeverKeep, Packing::kPackAlways}) {
    po.packing = p;
    plan::Plan fixed;
    ASSERT_TRUE(plan::make_plan(Kind::kGdn, d, po, &fixed).ok());
    EXPECT_GT(fixed.layouts.cost, pl.layouts.cost) << plan::packing_name(p);
    ChunkProgram fp;
    ASSERT_TRUE(compile_chunk_program(fixed.graph, fixed.layouts.op_layout, fixed.opt, &fp).ok());
    EXPECT_FALSE(fp.keep_state || fp.keep_keys || fp.keep_vn);
    EXPECT_EQ(fp.repack_row_blocks, p == Packing::kPackAlways);
  }
}

// On a unit that keeps the splits (AMX's class), the engine's fused products make V''s split packing once, on
// V' = T R's way out, for P V' and KDA's dense update alike: that update packs nothing, so keeping V' packed
// for it (an fp32 key panel and the products unfused; measured slower on the Intel Xeon with AMX) is not
// planned. Where the splits run in fp32 there are no fused products, and the dense update packs V'.
TEST(Packing, KdasUpdateReadsTheFusedProductsPackingOfVn) {
  plan::Device d = host();
  d.has_bf16_matrix = true;
  for (double rate : {16.0, 1.5}) {
    d.bf16_macs_per_cycle = rate * d.matrix_macs_per_cycle;
    const plan::Bf16CostModel cm(d, Kind::kKda, kTrilBlock);
    EXPECT_EQ(cm.fused_products(), rate > 3) << rate;
    const plan::Graph g = plan::build_chunk_graph(Kind::kKda, 64, 128, 128, passes(true, true));
    const int ktv = op_index(g, plan::OpCode::kKtV);
    ASSERT_GE(ktv, 0);
    EXPECT_EQ(cm.reads_fused_packing(g.ops[ktv], Layout::kDense), rate > 3) << rate;
    EXPECT_FALSE(cm.reads_fused_packing(g.ops[ktv], Layout::kBlocked));
    if (rate > 3) {  // two products (V' split) on the key rows in place, nothing packed
      const double macs = 128.0 * 128 * 64;
      EXPECT_NEAR(cm.op_cost(g, ktv, Layout::kDense), 2 * macs / d.bf16_macs_per_cycle * d.bf16_dense_penalty,
                  1e-9 * macs);
    }
    plan::PlanOptions po;
    po.bf16 = true;
    plan::Plan pl;
    ASSERT_TRUE(plan::make_plan(Kind::kKda, d, po, &pl).ok());
    ChunkProgram prog;
    ASSERT_TRUE(compile_chunk_program(pl.graph, pl.layouts.op_layout, pl.opt, &prog).ok());
    EXPECT_FALSE(prog.keep_vn) << rate << " " << prog.describe();
  }
}

// GDN's bf16 step puts the decays on K S's and Q S's results in the products' registers: Ke and Qs cost
// nothing in the bf16 model (they are passes in exact mode's, and in KDA's bf16 step, which rounds the decayed
// keys and queries as operands).
TEST(Packing, GdnsDecaysRideOnTheProductsResults) {
  const plan::Device d = host();
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    const plan::Bf16CostModel cm(d, kind, kTrilBlock);
    const plan::DeviceCostModel fp32(d);
    const plan::Graph g = plan::build_chunk_graph(kind, 64, 128, 128, passes(true, true));
    for (plan::OpCode code : {plan::OpCode::kKe, plan::OpCode::kQs}) {
      const int i = op_index(g, code);
      ASSERT_GE(i, 0);
      EXPECT_EQ(cm.scales_results(g.ops[i]), kind == Kind::kGdn);
      EXPECT_GT(fp32.op_cost(g, i, Layout::kDense), 0);
      if (kind == Kind::kGdn) {
        EXPECT_EQ(cm.op_cost(g, i, Layout::kDense), 0.0);
      } else {
        EXPECT_EQ(cm.op_cost(g, i, Layout::kDense), fp32.op_cost(g, i, Layout::kDense));
      }
    }
  }
}

TEST(Packing, NpuDevicesAreRefusedInBf16) {
  for (const char* dev : {"ascend-310p", "hexagon-v75"}) {
    plan::Device d;
    ASSERT_TRUE(plan::load_device(dev, &d).ok());
    plan::PlanOptions po;
    po.bf16 = true;
    plan::Plan pl;
    const Status st = plan::make_plan(Kind::kGdn, d, po, &pl);
    EXPECT_NE(st.message().find("requires blocked matrix operands"), std::string::npos) << dev << ": " << st.ToString();
  }
}

TEST(Packing, BfSixteenPlansRoundTripThroughJson) {
  const plan::Device d = host();
  for (Packing p : {Packing::kPlanned, Packing::kNeverKeep, Packing::kPackAlways}) {
    plan::PlanOptions po;
    po.bf16 = true;
    po.packing = p;
    plan::Plan pl, back;
    ASSERT_TRUE(plan::make_plan(Kind::kKda, d, po, &pl).ok());
    const Status st = plan::plan_from_json(plan::plan_to_json(pl).dump(), &back);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(back.opt.bf16);
    EXPECT_EQ(back.opt.packing, p);
    EXPECT_DOUBLE_EQ(back.layouts.cost, pl.layouts.cost);
  }
  // A fixed choice runs every product dense: a blocked step is refused.
  plan::PlanOptions po;
  po.bf16 = true;
  po.packing = Packing::kNeverKeep;
  plan::Plan pl, back;
  ASSERT_TRUE(plan::make_plan(Kind::kGdn, d, po, &pl).ok());
  nlohmann::json j = plan::plan_to_json(pl);
  for (auto& s : j["steps"]) {
    if (s["code"] == "KS") s["layout"] = "blocked";
  }
  const Status st = plan::plan_from_json(j.dump(), &back);
  EXPECT_NE(st.message().find("packing 'never-keep' runs every step dense"), std::string::npos) << st.ToString();
}

struct PackedRun {
  Tensor o, s;
  RunStats stats;
};

// One engine call in bf16 precision with a packing choice or a given plan.
PackedRun run(const TensorFile& f, Kind kind, Packing packing, std::shared_ptr<const plan::Plan> pl = nullptr) {
  Inputs in;
  EXPECT_TRUE(bind_inputs(f, &in).ok());
  Options opt;
  opt.kind = kind;
  opt.precision = Precision::kBf16;
  const auto& q = f.tensors.at("q");
  const auto& v = f.tensors.at("v");
  PackedRun r;
  r.o = Tensor(DType::kF32, {q.shape[0], q.shape[1], v.shape[2], v.shape[3]});
  r.s = Tensor(DType::kF32, {q.shape[0], v.shape[2], q.shape[3], v.shape[3]});
  EngineConfig cfg;
  cfg.threads = 2;
  cfg.packing = packing;
  cfg.plan = std::move(pl);
  const Status st = engine_forward(in, opt, cfg, Outputs{r.o.view(), r.s.view()}, &r.stats);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

// The KDA plan with P V' and the update blocked: V' packed once for both (the update through its panel).
std::shared_ptr<const plan::Plan> kda_keeping_vn(int64_t T, int64_t HV, int64_t K, int64_t V) {
  plan::Device d;
  EXPECT_TRUE(plan::load_device(plan::devices_dir() + "/host.json", &d).ok());  // shipped, not a calibration
  plan::PlanOptions po;
  po.K = K;
  po.V = V;
  po.bf16 = true;
  plan::MapRequest req;
  req.shape.seq_tokens = {T};
  req.shape.C = 64;
  req.shape.HV = HV;
  req.shape.V = V;
  req.shape.workers = 2;
  auto p = std::make_shared<plan::Plan>();
  EXPECT_TRUE(plan::make_execution_plan(Kind::kKda, d, "hanpu", po, req, p.get()).ok());
  for (plan::OpCode c : {plan::OpCode::kPV, plan::OpCode::kKtV}) p->layouts.op_layout[op_index(p->graph, c)] = Layout::kBlocked;
  return p;
}

TEST(Packing, EveryChoiceGivesTheSameBits) {
  // bf16 inputs (q, k enter the GEMMs as loaded) and f32 inputs in bf16 precision; a partial last chunk.
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    for (DType dt : {DType::kBF16, DType::kF32}) {
      const TensorFile f = testing::small_problem(kind, dt, 1, 200, 2, 4, 64, 48, 21);
      const PackedRun planned = run(f, kind, Packing::kPlanned);

      EXPECT_NE(planned.stats.chunk_program.find("bf16: kept packed"), std::string::npos) << planned.stats.chunk_program;
      for (Packing p : {Packing::kNeverKeep, Packing::kPackAlways}) {
        const PackedRun r = run(f, kind, p);
        EXPECT_EQ(r.o.bytes, planned.o.bytes) << kind_name(kind) << " " << dtype_name(dt) << " " << plan::packing_name(p);
        EXPECT_EQ(r.s.bytes, planned.s.bytes) << kind_name(kind) << " " << dtype_name(dt) << " " << plan::packing_name(p);
        EXPECT_NE(r.stats.chunk_program, planned.stats.chunk_program);
      }
      if (kind == Kind::kKda) {
        const PackedRun kept = run(f, kind, Packing::kPlanned, kda_keeping_vn(200, 4, 64, 48));

        EXPECT_NE(kept.stats.chunk_program.find("V'"), std::string::npos) << kept.stats.chunk_program;
        EXPECT_NE(kept.stats.chunk_program.find("(packed"), std::string::npos) << kept.stats.chunk_program;
        EXPECT_EQ(kept.o.bytes, planned.o.bytes) << dtype_name(dt);
        EXPECT_EQ(kept.s.bytes, planned.s.bytes) << dtype_name(dt);
      }
    }
  }
}

}  // namespace
}  // namespace hanpu
