// The multi-engine runtime on the NPU model: the four groups on hand-computable tasks (the arithmetic is
// in each test), the barrier switch, per-task completion, region refusal, task specs, determinism.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>

#include "fuse/runtime.h"
#include "fuse_test_util.h"
#include "kernels/bf16_round.h"

namespace hanpu::fuse {
namespace {

// Round numbers: 1 GHz, 10 us per entry, transfers without set-up at 100 B/cycle, no shared-bandwidth cap.
plan::Device round_device() {
  plan::Device d;
  EXPECT_TRUE(plan::load_device("hexagon-v75", &d).ok());
  d.clock_ghz = 1;
  d.sim.launch_overhead_us = 10;
  d.sim.transfer_setup_cycles = 0;
  d.sim.global_read_bytes_per_cycle = d.sim.global_write_bytes_per_cycle = 100;
  d.sim.global_gbps = 0;
  return d;
}

Task one_stage(EngineClass e, double cycles, int64_t region = 0) {
  Task t;
  t.spec = engine_class_name(e);
  t.stages.push_back({"work", e, false, cycles, 0, {}});
  t.on_chip_bytes = region;
  return t;
}

GroupResult group(const std::vector<Task>& tasks, int g, const plan::Device& d) {
  GroupResult r;
  const Status st = run_group(tasks, d, g, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

// A: 10,000 matrix cycles = 10 us; B: 10,000 vector cycles = 10 us; entries 10 us each.
//   1: entry 0-10, A 10-20, entry 20-30, B 30-40             -> 40 (A 20, B 40)
//   2: entries 0-10 and 10-20 (queued), A 10-20, B 20-30     -> 30 (A 20, B 30)
//   3: entry 0-10, A 10-20, B after A's end 20-30            -> 30
//   4: entry 0-10, A and B together 10-20                    -> 20 (both 20)
TEST(Fuse, FourGroupsOnHandComputableTasks) {
  const plan::Device d = round_device();
  const std::vector<Task> ab = {one_stage(EngineClass::kMatrix, 10000), one_stage(EngineClass::kVector, 10000)};
  const double makespan[4] = {40, 30, 30, 20};
  const std::vector<double> done[4] = {{20, 40}, {20, 30}, {20, 30}, {20, 20}};
  for (int g = 1; g <= 4; ++g) {
    const GroupResult r = group(ab, g, d);
    EXPECT_DOUBLE_EQ(r.makespan_us, makespan[g - 1]) << g;
    EXPECT_EQ(r.completion_us, done[g - 1]) << g;
  }
}

// A short task paired with a long one completes at its own time in group 4: A 10 us, B 100 us.
TEST(Fuse, EachTaskCompletesAtItsOwnLastStage) {
  const GroupResult r = group({one_stage(EngineClass::kMatrix, 10000), one_stage(EngineClass::kVector, 100000)}, 4,
                              round_device());
  EXPECT_EQ(r.completion_us, (std::vector<double>{20, 110}));
}

// The barrier switch (3 vs 4) changes the order and nothing else: the same work, bytes and regions.
TEST(Fuse, TheBarrierChangesOrderOnly) {
  PairReport r;
  ASSERT_TRUE(run_pair("gemm:256x256x512:f16", "softmax:1024x1024:f16", round_device(), Executor::kModel, &r).ok());
  const GroupResult &barrier = r.groups[2], &free = r.groups[3];
  EXPECT_EQ(barrier.engine_busy_us.size(), free.engine_busy_us.size());
  for (const auto& [engine, us] : barrier.engine_busy_us) {
    if (engine != "DMA") {  // compute lanes
      EXPECT_NEAR(free.engine_busy_us.at(engine), us, 1e-9 * us) << engine;
    }
  }
  EXPECT_EQ(barrier.gm_bytes, free.gm_bytes);
  EXPECT_LE(free.makespan_us, barrier.makespan_us);
  EXPECT_EQ(barrier.peak_on_chip_bytes, r.tasks[0].on_chip_bytes + r.tasks[1].on_chip_bytes);
  PairReport again;
  ASSERT_TRUE(run_pair("gemm:256x256x512:f16", "softmax:1024x1024:f16", round_device(), Executor::kModel, &again).ok());
  for (int g = 0; g < 4; ++g) EXPECT_EQ(again.groups[g].makespan_us, r.groups[g].makespan_us);  // deterministic
  EXPECT_DOUBLE_EQ(r.a_effect, r.groups[2].makespan_us / r.groups[3].makespan_us);
  // The ideal bound from each task run alone in its own entry, recomputed here from the lanes' busy times.
  double lane[3] = {0, 0, 0};
  for (const Task& t : r.tasks) {
    GroupResult alone;
    ASSERT_TRUE(run_group({t}, round_device(), 1, &alone).ok());
    lane[0] += alone.lane_busy_us[Lane::kDma];
    lane[1] += alone.lane_busy_us[Lane::kVector];
    lane[2] += alone.lane_busy_us[Lane::kMatrix];
  }
  EXPECT_GT(lane[1], 0);  // both compute lanes are used by this pair
  EXPECT_GT(lane[2], 0);
  EXPECT_DOUBLE_EQ(r.ideal, (lane[0] + lane[1] + lane[2]) / std::max({lane[0], lane[1], lane[2]}));
}

// DMA stall on the model is bandwidth contention: serial entries (group 1) stall exactly as much as the
// tasks do alone, two transfer-heavy tasks at once (group 4) stall more.
TEST(Fuse, DmaStallIsContention) {
  // Ascend's loads (MTE2) and stores (MTE3) are separate queues: one task's loads can overlap the other's
  // stores, and together they ask for more than the chip's bandwidth.
  plan::Device d;
  ASSERT_TRUE(plan::load_device("ascend-310p", &d).ok());
  d.clock_ghz = 1;
  d.sim.transfer_setup_cycles = 0;
  d.sim.global_read_bytes_per_cycle = d.sim.global_write_bytes_per_cycle = 100;
  d.sim.global_gbps = 150;
  PairReport r;
  ASSERT_TRUE(run_pair("eltwise:2048x2048:f32", "transform:2048x2048:f32", d, Executor::kModel, &r).ok());
  double alone = 0;  // each task's own loads against its own stores
  for (const Task& t : r.tasks) {
    GroupResult g;
    ASSERT_TRUE(run_group({t}, d, 1, &g).ok());
    alone += g.dma_stall_us;
  }
  EXPECT_NEAR(r.groups[0].dma_stall_us, alone, 1e-6 * alone);  // serial entries add no contention
  EXPECT_GT(r.groups[3].dma_stall_us, alone + 1);              // together they contend
}

// In one entry the tasks' regions are disjoint and inside the on-chip memory; exactly full still fits.
TEST(Fuse, RegionsNeverOverlap) {
  const int64_t cap = on_chip_capacity(round_device());
  const std::vector<Task> ts = {one_stage(EngineClass::kMatrix, 100, cap / 4), one_stage(EngineClass::kVector, 100, cap / 2),
                                one_stage(EngineClass::kDma, 0, cap / 4)};
  for (int g = 1; g <= 4; ++g) {
    GroupPlan p;
    ASSERT_TRUE(plan_group(ts, g, cap, "VTCM", &p).ok());
    for (size_t a = 0; a < ts.size(); ++a) {
      EXPECT_GE(p.region_offset[a], 0);
      EXPECT_LE(p.region_offset[a] + ts[a].on_chip_bytes, cap);
      for (size_t b = a + 1; b < ts.size() && g >= 3; ++b) {
        const bool disjoint = p.region_offset[a] + ts[a].on_chip_bytes <= p.region_offset[b] ||
                              p.region_offset[b] + ts[b].on_chip_bytes <= p.region_offset[a];
        EXPECT_TRUE(disjoint) << g << ": " << a << " " << b;
      }
    }
  }
  GroupPlan p;
  EXPECT_FALSE(plan_group(ts, 4, cap - 1, "VTCM", &p).ok());
}

// Each in-flight task needs its own region: two tasks of 5 MB do not share an 8 MB VTCM in one entry,
// but run in separate entries.
TEST(Fuse, AnOversubscribedPairIsRefused) {
  const plan::Device d = round_device();
  const int64_t mb5 = 5 << 20;
  const std::vector<Task> big = {one_stage(EngineClass::kMatrix, 100, mb5), one_stage(EngineClass::kVector, 100, mb5)};
  GroupResult r;
  EXPECT_NE(run_group(big, d, 4, &r).message().find("refused"), std::string::npos);
  EXPECT_NE(run_group(big, d, 3, &r).message().find("refused"), std::string::npos);
  EXPECT_TRUE(run_group(big, d, 1, &r).ok());
  EXPECT_EQ(r.peak_on_chip_bytes, mb5);  // one region at a time
}

// A GEMM's resource vector: MACs over the matrix rate; DMA bytes = A and B panels once per output tile
// plus C; 64x64x64 in f16 fits one tile: 3 x 64 x 64 x 2 B.
TEST(Fuse, TaskSpecsBuildTilePipelines) {
  const plan::Device d = round_device();
  Task t;
  ASSERT_TRUE(build_task("gemm:64x64x64:f16", d, 1 << 20, &t).ok());
  EXPECT_DOUBLE_EQ(t.matrix_cycles, 64.0 * 64 * 64 / d.matrix_macs_per_cycle);
  EXPECT_DOUBLE_EQ(t.dma_bytes, 3.0 * 64 * 64 * 2);
  ASSERT_TRUE(build_task("eltwise:100x256:f32:3", d, 1 << 20, &t).ok());
  EXPECT_DOUBLE_EQ(t.vector_cycles, 3 * 100.0 * 256 * 4 / d.vector_bytes_per_cycle);
  EXPECT_LE(t.on_chip_bytes, 1 << 20);
  for (const char* bad : {"gemm:64x64", "conv:8x8", "softmax:8x0", "softmax:8x8:f8", "gemm", "eltwise:8x8:f16:0"}) {
    EXPECT_NE(build_task(bad, d, 1 << 20, &t).message().find(std::string("task '") + bad), std::string::npos) << bad;
  }
  EXPECT_NE(build_task("softmax:8x100000:f32", d, 1 << 16, &t).message().find("does not fit"), std::string::npos);
  // Sizes that would exhaust memory are refused up front.
  // (Its stage count, about 1e24, is past int64's range: the message prints it, not a wrapped negative.)
  const std::string huge = build_task("gemm:999999999x999999999x999999999", d, 1 << 20, &t).message();
  EXPECT_NE(huge.find("too many tiles: "), std::string::npos) << huge;
  EXPECT_NE(huge.find(" stages (at most 2000000)"), std::string::npos) << huge;
  EXPECT_EQ(huge.find('-'), std::string::npos) << huge;
  EXPECT_NE(build_task("eltwise:100000x2000", d, 1 << 20, &t, true).message().find("host data"), std::string::npos);
}

// On the host executor every kind of task gives, paired with a GEMM under one entry (barrier off), the
// same output bit for bit as run alone; and the outputs are the kernels' (a GEMM against a plain
// triple loop, softmax rows summing to 1).
TEST(FuseHost, PairedResultsEqualRunningAlone) {
  const char* partners[] = {"softmax:96x80:f32", "rmsnorm:96x80", "dequant:96x80", "transform:40x72", "eltwise:96x80:f32:3"};
  for (const char* spec : partners) {
    const Task ga = host_task("gemm:70x50x300"), pa = host_task(spec);
    GroupResult r;
    ASSERT_TRUE(run_group_host({ga}, 1, 4 << 20, &r).ok());
    ASSERT_TRUE(run_group_host({pa}, 1, 4 << 20, &r).ok());
    const Task gb = host_task("gemm:70x50x300"), pb = host_task(spec);
    ASSERT_TRUE(run_group_host({gb, pb}, 4, 4 << 20, &r).ok());
    EXPECT_EQ(*ga.host_output, *gb.host_output) << spec;
    EXPECT_EQ(*pa.host_output, *pb.host_output) << spec;
    EXPECT_EQ(r.completion_us.size(), 2u);
  }
  // The GEMM's numbers: C = bf16(A) bf16(B) with A, B the task's inputs (task_inputs, seeds 1 and 2), the
  // operands rounded as the matrix lane's bf16 GEMM takes them, fp32 accumulation.
  const Task g = host_task("gemm:33x17x40");
  GroupResult r;
  ASSERT_TRUE(run_group_host({g}, 1, 4 << 20, &r).ok());
  AlignedVector<float> A = task_inputs(33 * 40, 1), B = task_inputs(40 * 17, 2);
  for (float& v : A) v = round_bf16(v);
  for (float& v : B) v = round_bf16(v);
  for (int i = 0; i < 33; ++i) {
    for (int j = 0; j < 17; ++j) {
      double c = 0;
      for (int k = 0; k < 40; ++k) c += static_cast<double>(A[i * 40 + k]) * B[k * 17 + j];
      EXPECT_NEAR((*g.host_output)[i * 17 + j], c, 1e-4) << i << "," << j;
    }
  }
  const Task sm = host_task("softmax:5x300:f32");
  ASSERT_TRUE(run_group_host({sm}, 1, 4 << 20, &r).ok());
  for (int row = 0; row < 5; ++row) {
    double sum = 0;
    for (int c = 0; c < 300; ++c) sum += (*sm.host_output)[row * 300 + c];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(FuseHost, GroupsAndRefusal) {
  const std::vector<Task> ts = {host_task("gemm:64x64x64"), host_task("eltwise:64x64")};
  for (int g = 1; g <= 4; ++g) {
    GroupResult r;
    ASSERT_TRUE(run_group_host(ts, g, 4 << 20, &r).ok());
    EXPECT_GT(r.makespan_us, 0);
    EXPECT_LE(*std::max_element(r.completion_us.begin(), r.completion_us.end()), r.makespan_us + 1e-9);
    if (g != 4) {  // A before B unless concurrent
      EXPECT_LT(r.completion_us[0], r.completion_us[1]);
    }
    EXPECT_EQ(r.dma_stall_us, -1);
  }
  GroupResult r;
  EXPECT_NE(run_group_host(ts, 4, ts[0].on_chip_bytes, &r).message().find("refused"), std::string::npos);
  PairReport pr;
  ASSERT_TRUE(run_pair("gemm:64x64x64", "eltwise:64x64", host_device(), Executor::kHost, &pr, nullptr, 3).ok());
  for (const GroupResult& g : pr.groups) EXPECT_TRUE(std::isfinite(g.dma_stall_us));  // the model's test: DmaStallIsContention
  Task model_only;
  ASSERT_TRUE(build_task("gemm:64x64x64", round_device(), 1 << 20, &model_only).ok());
  EXPECT_NE(run_group_host({model_only}, 1, 4 << 20, &r).message().find("without host data"), std::string::npos);
}

}  // namespace
}  // namespace hanpu::fuse
