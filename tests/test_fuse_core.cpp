// The one-core host executor (fuse/core_executor.cpp): every group's outputs equal each task's alone, bit
// for bit; group 4 interleaves the two tasks' slices in one stream; errors name what is wrong.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "exec/thread_pool.h"
#include "fuse/runtime.h"
#include "fuse_test_util.h"
#include "hanpu/engine.h"

namespace hanpu::fuse {
namespace {

// Each host stage cut into slices gives the same bits as the stage run whole, whatever the other task
// does between its slices: every group (and group 2 on two cores) against each task run alone.
TEST(FuseCore, EveryGroupEqualsRunningAlone) {
  const char* partners[] = {"softmax:96x80:f32", "rmsnorm:96x80", "dequant:96x80", "transform:40x72",
                            "eltwise:96x80:f32:3"};
  const plan::Device d = host_device();
  for (const char* spec : partners) {
    const Task ga = host_task("gemm:70x50x300"), pa = host_task(spec);
    GroupResult r;
    ASSERT_TRUE(run_group_core({ga}, d, 1, &r).ok());
    ASSERT_TRUE(run_group_core({pa}, d, 1, &r).ok());
    for (int g = 1; g <= 5; ++g) {
      const Task gb = host_task("gemm:70x50x300"), pb = host_task(spec);
      ASSERT_TRUE(run_group_core({gb, pb}, d, std::min(g, 4), &r, nullptr, g == 5).ok());
      EXPECT_EQ(*ga.host_output, *gb.host_output) << spec << " group " << g;
      EXPECT_EQ(*pa.host_output, *pb.host_output) << spec << " group " << g;
      ASSERT_EQ(r.completion_us.size(), 2u);
      EXPECT_LE(*std::max_element(r.completion_us.begin(), r.completion_us.end()), r.makespan_us + 1e-9);
      EXPECT_GT(r.lane_busy_us[Lane::kMatrix], 0) << spec;
    }
  }
  // The two-core executor computes the same bits.
  const Task gc = host_task("gemm:70x50x300"), g1 = host_task("gemm:70x50x300");
  GroupResult r;
  ASSERT_TRUE(run_group_core({gc}, d, 1, &r).ok());
  ASSERT_TRUE(run_group_host({g1}, 1, 4 << 20, &r).ok());
  EXPECT_EQ(*gc.host_output, *g1.host_output);
}

// Group 4 is one stream that alternates between the tasks (the trace's events in time order switch lanes
// at least once per GEMM tile), and neither task finishes before the lead's tile steps are nearly done;
// group 3 runs A wholly before B.
TEST(FuseCore, GroupFourInterleavesTheTwoStreams) {
  const plan::Device d = host_device();
  const std::vector<Task> ts = {host_task("gemm:256x256x256"), host_task("softmax:512x256:f32")};
  GroupResult r3, r4;
  ASSERT_TRUE(run_group_core(ts, d, 3, &r3).ok());
  EXPECT_LT(r3.completion_us[0], r3.completion_us[1]);
  std::string trace;
  ASSERT_TRUE(run_group_core(ts, d, 4, &r4, &trace).ok());
  EXPECT_GT(std::min(r4.completion_us[0], r4.completion_us[1]), 0.5 * r4.makespan_us);
  const nlohmann::json j = nlohmann::json::parse(trace);
  std::map<int, std::string> lane_name;
  std::vector<std::pair<double, int>> events;  // (start, lane)
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") lane_name[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") events.emplace_back(e["ts"].get<double>(), e["tid"].get<int>());
  }
  std::sort(events.begin(), events.end());
  int switches = 0;
  for (size_t i = 1; i < events.size(); ++i) {
    const std::string& a = lane_name[events[i - 1].second];
    const std::string& b = lane_name[events[i].second];
    if (a != "control" && b != "control" && a != b) ++switches;
  }
  // 256 / 128 = 2 tiles per dimension: 8 tile products, each with 8 row-slices earning credit.
  EXPECT_GE(switches, 8) << trace.substr(0, 2000);
}

// A host gdn / kda task is the engine's hanpu strategy on one head: its output equals engine_forward's on
// the same inputs bit for bit, alone and interleaved with a vector task in group 4.
TEST(FuseCore, ChunkTasksAreTheEnginesHeadSteps) {
  const plan::Device d = host_device();
  for (const Kind kind : {Kind::kGdn, Kind::kKda}) {
    const int64_t chunks = 3, T = 64 * chunks, D = 128, w = kind == Kind::kKda ? D : 1;
    // The task's own inputs (fuse/task.h task_inputs, seeds 4 to 8) and its gate and beta maps.
    AlignedVector<float> q = task_inputs(T * D, 4), k = task_inputs(T * D, 5), v = task_inputs(T * D, 6),
                       g = task_inputs(T * w, 7), beta = task_inputs(T, 8);
    for (float& x : g) x = -0.05f * (1.0f + x);
    for (float& x : beta) x = 0.5f * (1.0f + x);
    AlignedVector<float> o(static_cast<size_t>(T * D));
    Inputs in;
    in.q = TensorView(q.data(), DType::kF32, {1, T, 1, D});
    in.k = TensorView(k.data(), DType::kF32, {1, T, 1, D});
    in.v = TensorView(v.data(), DType::kF32, {1, T, 1, D});
    in.g = kind == Kind::kKda ? TensorView(g.data(), DType::kF32, {1, T, 1, D}) : TensorView(g.data(), DType::kF32, {1, T, 1});
    in.beta = TensorView(beta.data(), DType::kF32, {1, T, 1});
    Options opt;
    opt.kind = kind;
    opt.use_qk_l2norm_in_kernel = true;
    opt.precision = Precision::kBf16;
    EngineConfig cfg;
    cfg.threads = 1;
    Outputs out;
    out.o = TensorView(o.data(), DType::kF32, {1, T, 1, D});
    ASSERT_TRUE(engine_forward(in, opt, cfg, out, nullptr).ok());
    const std::string spec = std::string(kind_name(kind)) + ":" + std::to_string(chunks);
    const Task alone = host_task(spec);
    ASSERT_EQ(alone.stages.size(), 2u * chunks);
    EXPECT_GT(alone.matrix_cycles, 0);
    GroupResult r;
    ASSERT_TRUE(run_group_core({alone}, d, 1, &r).ok());
    EXPECT_EQ(*alone.host_output, o) << spec;
    const Task paired = host_task(spec), vec = host_task("softmax:128x256:f32");
    ASSERT_TRUE(run_group_core({paired, vec}, d, 4, &r).ok());
    EXPECT_EQ(*paired.host_output, o) << spec;
  }
}

// The one-core model on hand-computable tasks: a matrix stage that took 300 us alone and a vector stage
// that took 100 us, entries of 10 us. On one queue the pair takes 300 + 100 in one entry; with a matrix
// engine beside the core it takes max(300, 100); each stage keeps its measured time.
TEST(FuseCore, ModelPredictionFromTheAloneRates) {
  const plan::Device d = host_device();
  auto one = [](EngineClass e, double cycles) {
    Task t;
    t.spec = engine_class_name(e);
    t.stages.push_back({"work", e, false, cycles, 0, {}});
    (e == EngineClass::kMatrix ? t.matrix_cycles : t.vector_cycles) = cycles;
    return t;
  };
  const std::vector<Task> ts = {one(EngineClass::kMatrix, 5000), one(EngineClass::kVector, 7000)};
  std::vector<GroupResult> alone(2);
  alone[0].stage_us = {{300}};
  alone[1].stage_us = {{100}};
  alone[0].lane_busy_us[Lane::kControl] = alone[1].lane_busy_us[Lane::kControl] = 10;
  GroupResult serial[4], engine[4];
  ASSERT_TRUE(predict_core(ts, alone, d, false, serial).ok());
  ASSERT_TRUE(predict_core(ts, alone, d, true, engine).ok());
  EXPECT_NEAR(serial[0].makespan_us, 10 + 300 + 10 + 100, 1e-6);  // group 1: entry, A, entry, B
  EXPECT_NEAR(serial[2].makespan_us, 10 + 400, 1e-6);             // group 3: one entry, A then B
  EXPECT_NEAR(serial[3].makespan_us, 10 + 400, 1e-6);             // group 4: one queue, nothing overlaps
  EXPECT_NEAR(engine[3].makespan_us, 10 + 300, 1e-6);             // group 4: the matrix engine beside it
  EXPECT_NEAR(engine[2].makespan_us, 10 + 400, 1e-6);             // the barrier still serialises
  alone[1].stage_us = {};
  EXPECT_NE(predict_core(ts, alone, d, false, serial).message().find("does not match"), std::string::npos);
}

TEST(FuseCore, Errors) {
  const plan::Device d = host_device();
  GroupResult r;
  EXPECT_NE(run_group_core({host_task("gemm:64x64x64")}, d, 4, &r).message().find("interleaves two tasks"),
            std::string::npos);
  Task model_only;
  plan::Device hex;
  ASSERT_TRUE(plan::load_device("hexagon-v75", &hex).ok());
  ASSERT_TRUE(build_task("gemm:64x64x64", hex, 1 << 20, &model_only).ok());
  EXPECT_NE(run_group_core({model_only}, d, 1, &r).message().find("without host data"), std::string::npos);
  EXPECT_NE(run_group_core({host_task("gemm:64x64x64")}, d, 5, &r).message().find("group must be 1..4"),
            std::string::npos);
  // Regions that do not fit the host's L2 together are refused in one entry.
  plan::Device small = d;
  for (plan::Memory& m : small.memories) {
    if (m.name == "L2") m.bytes = host_task("gemm:64x64x64").on_chip_bytes;
  }
  const std::vector<Task> ts = {host_task("gemm:64x64x64"), host_task("eltwise:64x64")};
  EXPECT_NE(run_group_core(ts, small, 4, &r).message().find("refused"), std::string::npos);
  // Restricted to one CPU: group 2 on two cores is refused, and a pair report leaves it out.
  cpu_set_t saved, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  CPU_ZERO(&one);
  CPU_SET(allowed_cpus()[0], &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const Status refused = run_group_core(ts, d, 2, &r, nullptr, true);
  PairReport single;
  const Status single_st = run_pair("gemm:64x64x64", "eltwise:64x64", d, Executor::kHostCore, &single, nullptr, 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_NE(refused.message().find("needs two CPUs"), std::string::npos) << refused.ToString();
  ASSERT_TRUE(single_st.ok()) << single_st.ToString();
  EXPECT_FALSE(single.has_two_cores);
  PairReport pr;
  ASSERT_TRUE(run_pair("gemm:64x64x64", "eltwise:64x64", d, Executor::kHostCore, &pr, nullptr, 1).ok());
  EXPECT_EQ(pr.executor, "host-core");
  EXPECT_EQ(pr.has_two_cores, allowed_cpus().size() >= 2);
  EXPECT_EQ(pr.matrix_engine, host_matrix_engine());
  if (!pr.matrix_engine) {
    EXPECT_EQ(pr.ideal, 1);  // one engine: nothing to overlap under the engine model
  }
  EXPECT_GT(pr.gain_over_2_two_cores, 0);
  for (const GroupResult& g : pr.model) EXPECT_GT(g.makespan_us, 0);  // the model's prediction beside it
  EXPECT_EQ(pr.has_engine_model, !pr.matrix_engine);                  // and what a matrix engine would leave
  if (pr.has_engine_model) {
    EXPECT_LE(pr.engine_model[3].makespan_us, pr.model[3].makespan_us + 1e-9);
  }
}

}  // namespace
}  // namespace hanpu::fuse
