// The host overlap probe (fuse/probe.h): its arithmetic, its argument checks, and one small run on the lane
// this CPU has (skipped with a message where there is none). No timing is asserted: the probe reports times,
// it does not judge them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fuse/probe.h"
#include "kernels/kernel_set.h"
#include "kernels/overlap_probe.h"

namespace hanpu::fuse {
namespace {

TEST(OverlapProbe, OverlapIsTheHiddenShareOfTheShorterStream) {
  EXPECT_DOUBLE_EQ(overlap_fraction(10, 4, 10), 1.0);   // the vector stream wholly hidden
  EXPECT_DOUBLE_EQ(overlap_fraction(10, 4, 14), 0.0);   // one after the other
  EXPECT_DOUBLE_EQ(overlap_fraction(4, 10, 12), 0.5);   // half of the shorter (matrix) stream hidden
  EXPECT_LT(overlap_fraction(10, 4, 15), 0.0);          // interleaving cost extra
}

TEST(OverlapProbe, RejectsBadArguments) {
  ProbeResult r;
  const auto quiet = [](const std::string&) {};
  EXPECT_NE(run_overlap_probe(0, {1}, 10, quiet, &r).message().find("reps"), std::string::npos);
  EXPECT_NE(run_overlap_probe(1, {}, 10, quiet, &r).message().find("rounds"), std::string::npos);
  EXPECT_NE(run_overlap_probe(1, {0}, 10, quiet, &r).message().find(">= 1"), std::string::npos);
  EXPECT_NE(run_overlap_probe(1, {1}, 0, quiet, &r).message().find("steps"), std::string::npos);
}

TEST(OverlapProbe, ReportsEveryPointOnThisCpusLane) {
  if (probe_matrix_lane() == ProbeLane::kNone) GTEST_SKIP() << "this CPU has no AVX-512: there is no lane to probe";
  ProbeResult r;
  int lines = 0;
  const Status st = run_overlap_probe(2, {1, 3}, 2000, [&](const std::string&) { ++lines; }, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(lines, 18);
  EXPECT_EQ(r.matrix_engine, r.lane == ProbeLane::kAmxTile);  // AMX tiles: a matrix engine beside the vector unit
  EXPECT_FALSE(r.lane_name.empty());
  // Operand sources (registers, L1, L2), then vector kinds (fma, exp, memory), then rounds (1, 3).
  ASSERT_EQ(r.points.size(), 18u);
  EXPECT_EQ(r.points[0].operands, ProbeOperands::kRegisters);
  EXPECT_EQ(r.points[0].kind, ProbeVector::kFma);
  EXPECT_EQ(r.points[3].kind, ProbeVector::kExp);
  EXPECT_EQ(r.points[3].rounds, 3);
  EXPECT_EQ(r.points[5].kind, ProbeVector::kMemory);
  EXPECT_EQ(r.points[6].operands, ProbeOperands::kL1);
  EXPECT_EQ(r.points[17].operands, ProbeOperands::kL2);
  EXPECT_EQ(r.points[17].kind, ProbeVector::kMemory);
  for (const ProbePoint& p : r.points) {
    EXPECT_GT(p.matrix_us, 0);
    EXPECT_GT(p.vector_us, 0);
    EXPECT_GT(p.both_us, 0);
    EXPECT_DOUBLE_EQ(p.overlap, overlap_fraction(p.matrix_us, p.vector_us, p.both_us));
  }
  EXPECT_GT(r.matrix_gflops, 0);
  // The streams compute finite values whatever their length (nothing overflows or turns NaN).
  for (ProbeOperands ops : {ProbeOperands::kRegisters, ProbeOperands::kL1, ProbeOperands::kL2}) {
    for (ProbeVector kind : {ProbeVector::kFma, ProbeVector::kExp, ProbeVector::kMemory}) {
      EXPECT_TRUE(std::isfinite(probe_stream(r.lane, true, 2, kind, 100000, ops)))
          << r.lane_name << " " << probe_operands_name(ops) << " " << probe_vector_name(kind);
    }
  }
}

TEST(KernelPairProbe, RefusesBadArguments) {
  KernelPairResult r;
  const auto quiet = [](const std::string&) {};
  EXPECT_NE(run_kernel_pair_probe(0, 4, {128}, quiet, &r).message().find("reps"), std::string::npos);
  EXPECT_NE(run_kernel_pair_probe(1, 0, {128}, quiet, &r).message().find("slices"), std::string::npos);
  EXPECT_NE(run_kernel_pair_probe(1, 4, {}, quiet, &r).message().find("floats"), std::string::npos);
  EXPECT_NE(run_kernel_pair_probe(1, 4, {0}, quiet, &r).message().find(">= 1"), std::string::npos);
}

TEST(KernelPairProbe, TimesEveryScheduleOnTheActiveSet) {
  KernelPairResult r;
  int lines = 0;
  const Status st = run_kernel_pair_probe(2, 8, {32, 128}, [&](const std::string&) { ++lines; }, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(lines, 3);
  EXPECT_EQ(r.kernel_set, active_kernels().name);
  EXPECT_EQ(r.carries, active_kernels().bf16_matrix_engine);
  EXPECT_EQ(r.slices, 8);
  EXPECT_GT(r.gemm_us, 0);
  EXPECT_GT(r.exp_us, 0);
  EXPECT_DOUBLE_EQ(r.alternated_overlap, overlap_fraction(r.gemm_us, r.exp_us, r.alternated_us));
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[1].floats, 128);
  for (const PairPoint& p : r.points) {
    EXPECT_GT(p.carried_us, 0);
    EXPECT_DOUBLE_EQ(p.overlap, overlap_fraction(r.gemm_us, r.exp_us, p.carried_us));
  }
}

}  // namespace
}  // namespace hanpu::fuse
