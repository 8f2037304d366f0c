// The planner's mapping: the tail split decided by cost, FlashQLA's segment rule, the coverage check that
// makes a hand-edited mapping either executable or refused, and every registered strategy's execution plan
// run by the CPU executor (from memory and from its JSON) against the fp64 reference on a varlen batch
// with an empty sequence and a tail head.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "hanpu/engine.h"
#include "plan/plan.h"
#include "plan/strategy.h"
#include "test_util.h"

namespace hanpu {
namespace {

TEST(Mapping, TheTailSplitIsDecidedByCost) {
  // One tail head on two workers: two slices of 60 in one wave beat a whole head of 100; slices as dear as
  // the head gain nothing.
  EXPECT_EQ(plan::choose_tail_split(1, 2, 100, {0, 0, 60}), 2);
  EXPECT_EQ(plan::choose_tail_split(1, 2, 100, {0, 0, 100}), 1);
  // Three tail heads on four workers: 2 slices each need two waves (2 x 60 > 100).
  EXPECT_EQ(plan::choose_tail_split(3, 4, 100, {0, 0, 60}), 1);
  // Candidates without a cost (no aligned split into that many slices) are skipped.
  EXPECT_EQ(plan::choose_tail_split(1, 4, 100, {0, 0, 0, 0, 30}), 4);
  EXPECT_EQ(plan::slice_width(128, 3, 16), 48);
  EXPECT_EQ(plan::slice_width(128, 2, 32), 64);
}

TEST(Mapping, FlashQlaSegmentRule) {
  // max(4, 2^round(log2(3 sqrt(units chunks / workers)))): 3 sqrt(16 * 64 / 2) = 67.9 -> 64.
  EXPECT_EQ(plan::segment_length(16, 64, 2), 64);
  EXPECT_EQ(plan::segment_length(1, 1, 10), 4);
}

plan::Shape shape(std::vector<int64_t> tokens, int64_t HV, int workers) {
  plan::Shape s;
  s.seq_tokens = std::move(tokens);
  s.C = 64;
  s.HV = HV;
  s.V = 128;
  s.workers = workers;
  return s;
}

TEST(Mapping, EveryDataflowCoversEveryUnitOnceAndEditsAreChecked) {
  for (const plan::StrategyInfo& s : plan::strategies()) {
    plan::MapInputs in;
    in.head_cost = 100;
    in.slice_cost = {0, 0, 60};
    plan::Mapping m;
    ASSERT_TRUE(plan::map_work(s.opt, shape({300, 0, 70}, 3, 2), 32, in, &m).ok()) << s.name;
    ASSERT_TRUE(plan::check_mapping(m).ok()) << s.name;
    // Dropping an item leaves something uncovered; duplicating one covers it twice.
    plan::Mapping dropped = m, doubled = m;
    dropped.items.erase(dropped.items.begin());
    doubled.items.insert(doubled.items.begin(), doubled.items.front());
    EXPECT_FALSE(plan::check_mapping(dropped).ok()) << s.name;
    EXPECT_FALSE(plan::check_mapping(doubled).ok()) << s.name;
  }
  // hanpu on 3 heads x 3 sequences = 9 units over 2 workers: one tail unit split in two slices of 64.
  plan::MapInputs in;
  in.head_cost = 100;
  in.slice_cost = {0, 0, 60};
  plan::Mapping m;
  ASSERT_TRUE(plan::map_work(plan::find_strategy("hanpu")->opt, shape({300, 0, 70}, 3, 2), 32, in, &m).ok());
  EXPECT_EQ(m.tail_split, 2);
  ASSERT_EQ(m.items.size(), 10u);
  EXPECT_EQ(m.items[8].col0, 0);
  EXPECT_EQ(m.items[9].col0, 64);
  EXPECT_NE(m.items[8].worker, m.items[9].worker);
  // A chain cut in two is refused (the state would restart from nothing), as is a misaligned slice.
  plan::Mapping cut = m;
  cut.items[0].chunks = 2;
  EXPECT_NE(plan::check_mapping(cut).message().find("carry the state through all"), std::string::npos);
  plan::Mapping misaligned = m;
  misaligned.items[9].col0 = 48;
  misaligned.items[9].cols = 80;
  misaligned.items[8].cols = 48;
  EXPECT_NE(plan::check_mapping(misaligned).message().find("at a multiple of 32"), std::string::npos);
}

// B = 1 varlen: sequences of 300, 0 and 70 tokens, 3 value heads (9 units on 2 workers: a tail unit).
TensorFile varlen_problem(Kind kind) {
  TensorFile f = testing::small_problem(kind, DType::kF32, 1, 370, 3, 3, 32, 32, 21);
  Tensor cu(DType::kI64, {4});
  const int64_t offs[] = {0, 300, 300, 370};
  std::memcpy(cu.bytes.data(), offs, sizeof offs);
  f.tensors["cu_seqlens"] = cu;
  return f;
}

// An empty sequence that falls in the tail is one whole-column item, not column slices (found by
// `hanpu verify --seed 8`: KDA varlen, HV = 1, V = 100, the last of 5 sequences empty, 2 threads).
TEST(Mapping, AnEmptyTailSequenceIsOneItem) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    TensorFile f = testing::small_problem(kind, DType::kF32, 1, 50, 1, 1, 48, 100, 4);
    f.tensors["cu_seqlens"] = testing::tensor_of(DType::kI64, {4}, {0, 20, 50, 50});
    std::mt19937_64 rng(3);
    f.tensors["initial_state"] = testing::random_tensor(DType::kF32, {3, 1, 48, 100}, rng, 0.2);
    Options opt;
    opt.kind = kind;
    Inputs in;
    testing::Result ref;
    ASSERT_TRUE(testing::bind_with_reference(f, opt, &in, &ref).ok());
    for (Strategy s : all_strategies()) {
      EngineConfig cfg;
      cfg.strategy = s;
      cfg.threads = 2;
      Tensor o(DType::kF32, {1, 50, 1, 100}), st(DType::kF32, {3, 1, 48, 100});
      const Status run = engine_forward(in, opt, cfg, Outputs{o.view(), st.view()});
      ASSERT_TRUE(run.ok()) << strategy_name(s) << ": " << run.ToString();
      EXPECT_LE(testing::nmse_of(o, ref.o), 1e-10) << strategy_name(s);
      EXPECT_LE(testing::nmse_of(st, ref.state), 1e-10) << strategy_name(s);  // the empty one passes through
    }
  }
}

TEST(Mapping, EveryStrategysPlanRunsOnTheCpuExecutorWithinTheBars) {
  plan::Device host;
  ASSERT_TRUE(plan::load_device(plan::devices_dir() + "/host.json", &host).ok());  // shipped, not a calibration
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    const TensorFile f = varlen_problem(kind);
    Options opt;
    opt.kind = kind;
    Inputs in;
    testing::Result ref;
    ASSERT_TRUE(testing::bind_with_reference(f, opt, &in, &ref).ok());
    std::vector<plan::StrategyInfo> all = plan::strategies();
    for (const plan::StrategyInfo& s : plan::ablation_ladder()) all.push_back(s);
    for (const plan::StrategyInfo& s : all) {
      plan::PlanOptions po;
      po.K = po.V = 32;
      plan::MapRequest req;
      req.shape.seq_tokens = {300, 0, 70};
      req.shape.HV = 3;
      req.shape.V = 32;
      req.shape.workers = 2;
      auto pl = std::make_shared<plan::Plan>();
      ASSERT_TRUE(plan::make_execution_plan(kind, host, s.name, po, req, pl.get()).ok()) << s.name;
      auto loaded = std::make_shared<plan::Plan>();
      ASSERT_TRUE(plan::plan_from_json(plan::plan_to_json(*pl).dump(), loaded.get()).ok()) << s.name;
      Tensor o[2], st[2];
      for (int which = 0; which < 2; ++which) {
        o[which] = Tensor(DType::kF32, {1, 370, 3, 32});
        st[which] = Tensor(DType::kF32, {3, 3, 32, 32});
        EngineConfig cfg;
        cfg.plan = which ? loaded : pl;
        RunStats stats;
        const Status run = engine_forward(in, opt, cfg, Outputs{o[which].view(), st[which].view()}, &stats);
        ASSERT_TRUE(run.ok()) << s.name << ": " << run.ToString();
        EXPECT_EQ(stats.dataflow.rfind(s.name, 0), 0u) << stats.dataflow;
      }
      EXPECT_LE(testing::nmse_of(o[0], ref.o), 1e-10) << kind_name(kind) << " " << s.name;
      EXPECT_LE(testing::nmse_of(st[0], ref.state), 1e-10) << kind_name(kind) << " " << s.name;
      EXPECT_EQ(o[0].bytes, o[1].bytes) << s.name;  // the file runs exactly as the plan it was written from
      EXPECT_EQ(st[0].bytes, st[1].bytes) << s.name;
    }
  }
}

}  // namespace
}  // namespace hanpu

namespace hanpu {
namespace {

// Varlen at scale: 10,000 sequences of mixed lengths (0, 1, and up to three chunks), every strategy's
// mapping over them, against the fp64 reference.
TEST(Varlen, TenThousandMixedSequences) {
  constexpr int64_t N = 10000, HV = 2, K = 16, V = 16;
  std::mt19937_64 rng(7);
  std::vector<int64_t> offs = {0};
  for (int64_t n = 0; n < N; ++n) {
    const int64_t r = static_cast<int64_t>(rng() % 10);
    offs.push_back(offs.back() + (r == 0 ? 0 : r == 1 ? 1 : static_cast<int64_t>(rng() % 150)));
  }
  const int64_t T = offs.back();
  TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, T, 1, HV, K, V, 8);
  Tensor cu(DType::kI64, {N + 1});
  std::memcpy(cu.bytes.data(), offs.data(), offs.size() * sizeof(int64_t));
  f.tensors["cu_seqlens"] = cu;
  Options opt;
  opt.kind = Kind::kGdn;
  opt.use_qk_l2norm_in_kernel = true;
  Inputs in;
  testing::Result ref;
  ASSERT_TRUE(testing::bind_with_reference(f, opt, &in, &ref).ok());
  for (Strategy s : all_strategies()) {
    Tensor o(DType::kF32, {1, T, HV, V}), st(DType::kF32, {N, HV, K, V});
    EngineConfig cfg;
    cfg.strategy = s;
    cfg.threads = 2;
    ASSERT_TRUE(engine_forward(in, opt, cfg, Outputs{o.view(), st.view()}).ok()) << strategy_name(s);
    EXPECT_LE(testing::nmse_of(o, ref.o), 1e-10) << strategy_name(s);
    EXPECT_LE(testing::nmse_of(st, ref.state), 1e-10) << strategy_name(s);
  }
}

}  // namespace
}  // namespace hanpu
