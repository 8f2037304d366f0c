// Several application threads calling the engine at once, on different inputs, strategies and thread
// counts (prefill and decode): the shared worker threads serve one call at a time and every caller keeps
// its own workspaces, so each result equals the one computed alone, bit for bit. Run under
// ThreadSanitizer by `scripts/test.sh --tsan`.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "hanpu/engine.h"
#include "test_util.h"

namespace hanpu {
namespace {

struct Call {
  TensorFile f;
  Options opt;
  EngineConfig cfg;
  Tensor o, s;
};

Call make_call(int i) {
  const Kind kind = i % 2 ? Kind::kKda : Kind::kGdn;
  Call c;
  c.f = testing::small_problem(kind, DType::kF32, 1, 90 + 37 * i, 1, 2 + i % 3, 16, 24, 100 + i);
  c.opt.kind = kind;
  c.cfg.threads = 1 + i % 3;
  c.cfg.strategy = all_strategies()[i % all_strategies().size()];
  const int64_t T = c.f.tensors.at("q").shape[1], HV = c.f.tensors.at("v").shape[2];
  c.o = Tensor(DType::kF32, {1, T, HV, 24});
  c.s = Tensor(DType::kF32, {1, HV, 16, 24});
  return c;
}

Status run(Call& c) {
  Inputs in;
  HANPU_RETURN_IF_ERROR(bind_inputs(c.f, &in));
  return engine_forward(in, c.opt, c.cfg, Outputs{c.o.view(), c.s.view()});
}

TEST(Concurrency, CallsFromSeveralThreadsEqualTheCallsAlone) {
  constexpr int kCalls = 8, kCallers = 4, kRounds = 3;
  std::vector<Call> alone;
  for (int i = 0; i < kCalls; ++i) {
    alone.push_back(make_call(i));
    ASSERT_TRUE(run(alone.back()).ok()) << i;
  }
  std::vector<std::vector<Call>> mine(kCallers);
  std::vector<std::thread> callers;
  std::vector<int> failures(kCallers, 0);
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int i = t; i < kCalls; i += kCallers) {
          Call c = make_call(i);
          if (!run(c).ok()) ++failures[t];
          mine[t].push_back(std::move(c));
        }
      }
    });
  }
  for (std::thread& c : callers) c.join();
  for (int t = 0; t < kCallers; ++t) {
    EXPECT_EQ(failures[t], 0) << t;
    for (std::size_t j = 0; j < mine[t].size(); ++j) {
      const int i = t + static_cast<int>(j % ((kCalls - t + kCallers - 1) / kCallers)) * kCallers;
      EXPECT_EQ(mine[t][j].o.bytes, alone[i].o.bytes) << "caller " << t << " call " << i;
      EXPECT_EQ(mine[t][j].s.bytes, alone[i].s.bytes) << "caller " << t << " call " << i;
    }
  }
}

}  // namespace
}  // namespace hanpu
