// Repeated small calls keep resident memory flat: the engine's workspaces, plans and pools are reused, not
// grown per call. (Skipped under AddressSanitizer, whose quarantine holds freed memory on purpose.)
#include <gtest/gtest.h>

#include <fstream>

#include "hanpu/engine.h"
#include "test_util.h"

namespace hanpu {
namespace {

int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

TEST(Memory, TenThousandCallsKeepResidentMemoryFlat) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds hold freed memory";
#endif
  if (!std::ifstream("/proc/self/statm")) GTEST_SKIP() << "no /proc/self/statm";
  const TensorFile f = testing::small_problem(Kind::kGdn, DType::kF32, 1, 100, 1, 2, 16, 16, 3);
  Inputs in;
  ASSERT_TRUE(bind_inputs(f, &in).ok());
  Options opt;
  opt.kind = Kind::kGdn;
  Tensor o(DType::kF32, {1, 100, 2, 16}), s(DType::kF32, {1, 2, 16, 16});
  int64_t after_warmup = 0;
  for (int i = 0; i < 10000; ++i) {
    EngineConfig cfg;
    cfg.threads = 1 + i % 2;
    cfg.strategy = all_strategies()[i % all_strategies().size()];
    ASSERT_TRUE(engine_forward(in, opt, cfg, Outputs{o.view(), s.view()}).ok());
    if (i == 999) after_warmup = resident_bytes();
  }
  const int64_t growth = resident_bytes() - after_warmup;
  RecordProperty("rss_growth_bytes", std::to_string(growth));
  EXPECT_LT(growth, 1 << 20) << "resident memory grew by " << growth << " bytes over 9,000 calls";
}

}  // namespace
}  // namespace hanpu
