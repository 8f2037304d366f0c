// Subnormal flushing in the engine's threads (exec/fp_mode.h): on while a job runs, the caller's mode
// restored afterwards, and results with subnormal-producing gates still within the accuracy bars.
#include <gtest/gtest.h>

#include <atomic>
#include <cfloat>
#include <random>

#include "exec/fp_mode.h"
#include "exec/thread_pool.h"
#include "hanpu/engine.h"
#include "test_util.h"

namespace hanpu {
namespace {

// FLT_MIN * 0.5 is subnormal under IEEE rules and zero when results are flushed. `volatile` keeps the
// compiler from folding it at compile time.
bool subnormals_flushed() {
  volatile float tiny = FLT_MIN;
  volatile float half = 0.5f;
  return tiny * half == 0.0f;
}

TEST(FpMode, ScopedFlushRestoresTheCallersMode) {
  ASSERT_FALSE(subnormals_flushed());  // the process default is IEEE
  {
    ScopedFlushDenormals ftz;
    EXPECT_TRUE(subnormals_flushed());
  }
  EXPECT_FALSE(subnormals_flushed());
}

TEST(FpMode, EveryPoolWorkerFlushesAndTheCallerGetsItsModeBack) {
  ThreadPool pool(3);
  std::atomic<int> flushed{0};
  pool.run([&](int) { flushed += subnormals_flushed() ? 1 : 0; });
  EXPECT_EQ(flushed.load(), 3);
  EXPECT_FALSE(subnormals_flushed());
}

// Gates of -3 U(0, 1) per token: chunk decays of exp(-100) and below, i.e. subnormal intermediates in
// every chunk. Every strategy must still meet the fp32 bar against the fp64 reference.
TEST(FpMode, StronglyDecayingGatesStayWithinTheBar) {
  for (Kind kind : {Kind::kGdn, Kind::kKda}) {
    TensorFile f = testing::small_problem(kind, DType::kF32, 1, 300, 2, 2, 32, 32, 5);
    std::mt19937_64 rng(6);
    std::uniform_real_distribution<double> gd(-3.0, 0.0);
    std::vector<double> g(static_cast<std::size_t>(f.tensors["g"].numel()));
    for (double& x : g) x = gd(rng);
    fill_from_doubles(f.tensors["g"], g);
    Options opt;
    opt.kind = kind;
    Inputs in;
    testing::Result ref;
    ASSERT_TRUE(testing::bind_with_reference(f, opt, &in, &ref).ok());
    for (Strategy s : all_strategies()) {
      testing::Result got;
      got.o = Tensor(DType::kF32, ref.o.shape);
      got.state = Tensor(DType::kF32, ref.state.shape);
      EngineConfig cfg;
      cfg.strategy = s;
      cfg.threads = 2;
      ASSERT_TRUE(engine_forward(in, opt, cfg, Outputs{got.o.view(), got.state.view()}).ok());
      EXPECT_LE(testing::nmse_of(got.o, ref.o), 1e-10) << strategy_name(s) << " " << kind_name(kind);
      EXPECT_LE(testing::nmse_of(got.state, ref.state), 1e-10) << strategy_name(s) << " " << kind_name(kind);
    }
    EXPECT_FALSE(subnormals_flushed());
  }
}

}  // namespace
}  // namespace hanpu
